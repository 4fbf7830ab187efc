// ConnectionParking: HTTP connections that wait for their client, held without a thread.
//
// cpp-httplib 0.11 serves each open connection on one HTTP worker thread from accept to close, so a
// connection idle between keep-alive requests, or one whose client trickles its request head
// (slowloris), held a worker while it waited: a few hundred of them delayed every route, /health
// included. BoundedHttpServer parks such a connection here instead: one thread watches every parked
// socket with epoll, reads what arrives without blocking (ParkedConnection::on_readable), and hands
// the connection back to the workers once it has something to process — a whole request head and
// the body it frames (BodyWait), or enough bytes that the head's bounds decide it — or closes it when its client stays silent past its
// deadline. A worker is then busy only while a request is processed (as in TGI's and vLLM's
// event-driven servers), not while a client thinks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "mamba/status.h"

namespace mamba::server {

/// A connection handed to ConnectionParking. Owned by the parking while parked (by one thread at a
/// time otherwise); destroying it closes its socket.
class ParkedConnection {
 public:
  virtual ~ParkedConnection() = default;

  /// What becomes of a parked connection.
  enum class Next { kWait, kResume, kClose };

  /// The socket watched for input (owned by this object).
  virtual int fd() const = 0;
  /// On the parking thread, when fd() has bytes or its end: reads what is there without blocking.
  /// kResume: hand it back to a worker now; kClose: end it; kWait: keep watching.
  virtual Next on_readable() = 0;
  /// When the parking stops waiting for it, and what it does then (kResume or kClose; read after
  /// every on_readable(): the deadline may move, e.g. once a request's first byte arrives).
  virtual std::chrono::steady_clock::time_point deadline() const = 0;
  virtual Next at_deadline() = 0;
  /// Whether the parking should read the socket's input (on_readable() when bytes come); false
  /// pauses that — the client's bytes wait in the kernel, and only the connection's end (or its
  /// deadline) is watched — until a later call says true. Asked after every on_readable() that
  /// returns kWait, and on every tick (50 ms) while paused; may move deadline().
  virtual bool wants_input() { return true; }
};

class ConnectionParking {
 public:
  /// Hands a connection back to the workers (called on the parking thread, under its lock: it must
  /// not block, nor call back into the parking).
  using Resume = std::function<void(std::unique_ptr<ParkedConnection>)>;

  /// Starts the parking thread. `max_parked` ≥ 1: connections parked at once; one more is closed at
  /// once (its client sees the connection end, as after a keep-alive timeout). Errors: kIo when the
  /// OS refuses the epoll instance or the thread, with its reason.
  static Result<std::unique_ptr<ConnectionParking>> create(Resume resume, std::size_t max_parked);

  /// close_all(), then stops and joins the parking thread.
  ~ConnectionParking();
  ConnectionParking(const ConnectionParking&) = delete;
  ConnectionParking& operator=(const ConnectionParking&) = delete;

  /// Takes `c` (any thread) and watches it until on_readable() or its deadline says what comes
  /// next. Bytes already read into `c` are not looked at here: the caller parks only a connection
  /// that needs more. After close_all(), or with max_parked connections parked (or when the OS
  /// refuses to watch it), `c` is closed at once.
  void park(std::unique_ptr<ParkedConnection> c);

  /// Closes every parked connection and, from now on, every one parked: no connection is resumed
  /// after this returns (the workers are about to stop). Idempotent.
  void close_all();

  /// Connections parked now.
  std::size_t parked() const;

 private:
  ConnectionParking(int epoll_fd, Resume resume, std::size_t max_parked);
  void run();
  /// Takes the connection on fd out of the watch set (under mu_).
  std::unique_ptr<ParkedConnection> take(int fd);
  /// Stops or starts watching a parked socket's input (ParkedConnection::wants_input; under mu_).
  void watch_input(int fd, bool on);
  /// Resumes or closes `c` as `next` says (kResume / kClose; under mu_).
  void finish(std::unique_ptr<ParkedConnection> c, ParkedConnection::Next next);
  void close_deadlines(std::chrono::steady_clock::time_point now);

  const int epoll_fd_;
  const int wake_fd_;  // an eventfd: wakes the thread to stop
  const Resume resume_;
  const std::size_t max_parked_;
  mutable std::mutex mu_;
  std::unordered_map<int, std::unique_ptr<ParkedConnection>> parked_;  // by socket
  std::unordered_set<int> paused_;  // parked sockets whose input is not read now (wants_input)
  bool closed_ = false;    // close_all() was called
  bool stopping_ = false;  // the destructor runs
  std::thread thread_;
};

}  // namespace mamba::server
