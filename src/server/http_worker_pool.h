// The HTTP worker threads: cpp-httplib's TaskQueue, built before the server listens.
//
// cpp-httplib's own ThreadPool starts its threads inside listen(), in a constructor that
// std::terminate()s when the OS refuses one (a std::thread vector destroyed with joinable threads),
// i.e. after "listening on" and with no message. HttpWorkerPool::create() starts them up front and
// turns a refusal into an error naming the count and the OS's reason.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "mamba/status.h"

namespace mamba::server {

/// A fixed set of threads running enqueued jobs in FIFO order (cpp-httplib hands it each accepted
/// connection). Owned by whoever holds it; cpp-httplib takes ownership through new_task_queue and
/// calls shutdown() (finish queued jobs, join) when listen() returns.
class HttpWorkerPool final : public httplib::TaskQueue {
 public:
  /// Starts `n` ≥ 1 threads. Errors: kIo when the OS refuses one (the threads
  /// already started are stopped and joined first), naming n, how many started and errno's text.
  static Result<std::unique_ptr<HttpWorkerPool>> create(std::size_t n);

  ~HttpWorkerPool() override;
  void enqueue(std::function<void()> fn) override;
  /// Runs the before-shutdown callback (once), then finishes the queued jobs and joins the threads.
  void shutdown() override;

  /// Threads neither running a job nor about to take a queued one: threads − running − queued
  /// (0 when more are queued than idle). A snapshot, for a decision that tolerates a stale one.
  std::size_t idle() const;

  /// `fn` runs at the start of shutdown(), before the threads stop taking jobs (BoundedHttpServer's
  /// stop_parking: nothing may be enqueued after that). Set before the pool is handed to the server.
  void set_before_shutdown(std::function<void()> fn) { before_shutdown_ = std::move(fn); }

 private:
  HttpWorkerPool() = default;
  void work();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::size_t running_ = 0;  // jobs being run (under mu_)
  bool stopping_ = false;
  std::function<void()> before_shutdown_;
  std::vector<std::thread> threads_;
};

}  // namespace mamba::server
