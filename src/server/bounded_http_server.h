// BoundedHttpServer: cpp-httplib 0.11's Server with a bound on the bytes of a request's head (its
// request line and header lines).
//
// cpp-httplib 0.11 (Debian 12) reads each line of the head whole before it checks the line's length
// (8 KiB), and reads header lines with no bound on their count: one client sending 200 MB of header
// lines grew the server by 380 MB, and a single endless line grows it as well (later cpp-httplib
// bounds the count, CPPHTTPLIB_HEADER_MAX_COUNT). httplib::Server's per-connection loop
// (process_and_close_socket, a private virtual) is replaced here by the same keep-alive loop over
// the same request processing (process_request), reading through a stream that ends the head's
// bytes at the limits: a line over kMaxHeadLine bytes reads as ended there (so cpp-httplib answers
// it as it does now: 414 for the request line, 400 for a header line), a head over the whole limit
// as ended after it (cpp-httplib answers 400, which the error handler turns into 431 by
// head_fault()). Header lines cpp-httplib would silently skip or misread — whitespace before the
// ':' ("Transfer-Encoding : chunked" was dropped, the body then framed by Content-Length: a
// request-smuggling gap behind a proxy that reads it), no ':', a folded line, a bare LF ending —
// end the head the same way, answered 400 naming the line. Either way the connection ends after that answer (the lingering way: the client's
// further bytes are read and discarded for 2 s, or until it is silent for 2 s, 30 s at most, after a refused body), so the rest of the head is never read as a
// next request; handlers end it the same way after answers that leave bytes unread
// (close_after_answer()). The stream is kept across a connection's requests, so pipelined requests
// are all answered (cpp-httplib 0.11 dropped the bytes its per-request stream had read ahead),
// empty lines before a request line are skipped (RFC 9112 §2.2), and a connection that ends with
// bytes still unread (requests past the keep-alive count) ends the lingering way, so the answers
// already sent are not lost to a reset. After start_workers(), a connection waiting for
// its client — for a request head and then its body, or to end the lingering way — is held by a
// ConnectionParking rather than by its worker; the head's checks are HeadChecker's, run on the
// parked bytes too, and BodyWait says when the body is all here.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "mamba/status.h"
#include "server/body_wait.h"
#include "server/connection_parking.h"
#include "server/head_checker.h"

namespace mamba::server {

class HttpWorkerPool;

/// Ends the connection on `fd` after an answer already written to it, the lingering way (RFC 7230
/// §6.6): shutdown(SHUT_WR) so the client sees the answer end, then read and discard what it still
/// sends (a refused body or head) until it closes, sends nothing for `idle_ms`, or `max_ms` /
/// `max_bytes` are reached (nginx's lingering_timeout / lingering_time), then shutdown(SHUT_RD).
/// The descriptor stays open (its owner closes it).
void close_lingering(int fd, int idle_ms, int max_ms, std::size_t max_bytes);

class BoundedHttpServer : public httplib::Server {
 public:
  /// Bytes of one line of the head, CRLF included, cpp-httplib accepts (its
  /// CPPHTTPLIB_REQUEST_URI_MAX_LENGTH and CPPHTTPLIB_HEADER_MAX_LENGTH); one byte more is read, so
  /// that cpp-httplib sees the line as over its limit.
  static constexpr std::size_t kMaxHeadLine = HeadChecker::kMaxHeadLine;
  /// The bytes connections' buffers may hold in all of request bodies read ahead while parked
  /// (start_workers), until a worker has read them; a body that would take more is read by its
  /// worker, waiting on the client.
  static constexpr std::size_t kReadAheadBytes = std::size_t{128} << 20;

  /// `max_head_bytes` ≥ kMaxHeadLine + 1: the request line and all header lines together, CRLFs
  /// included (the body is not counted). `head_timeout`: the whole head must arrive within it of
  /// its first byte (kIncomplete otherwise): a client trickling its head a byte at a time (slowloris)
  /// held a worker for the read timeout per byte, without end.
  BoundedHttpServer(std::size_t max_head_bytes, std::chrono::milliseconds head_timeout);

  /// What ended the head of the request now processed on the calling thread early; kNone on a
  /// thread that processes no request. Read by the error handler (which is handed no stream).
  static HeadFault head_fault();
  /// For kMalformedLine: which line (1 = the first header line) and what is wrong with it, e.g.
  /// "header line 2 has whitespace before its ':'"; "" otherwise.
  static std::string head_fault_detail();

  /// Called from the post-routing hook (on the thread processing the request, for every answer)
  /// with the request's choice read as RFC 9110 §7.6.1 says (cpp-httplib 0.11 matches the
  /// Connection header's whole value, case-sensitively): true keeps the connection after this
  /// answer, false ends it. close_after_answer() and the keep-alive count still end it; without a
  /// call cpp-httplib's own reading decides.
  static void set_keep_alive(bool keep);

  /// The socket of the connection whose request the calling thread processes (a handler's, a
  /// hook's, a content provider's); -1 on other threads. Not owned: open until the request's
  /// processing returns.
  static int current_socket();
  /// The numeric address of current_socket()'s peer ("127.0.0.1", "::1"), "" when there is none:
  /// for a request refused before cpp-httplib filled Request::remote_addr (a head it could not parse).
  static std::string current_peer_address();

  /// Reads at most `size` bytes of the body of the request the calling thread processes (a hook's
  /// or handler's) into `out` (not owned, `size` bytes long), from the connection's buffer or, once
  /// it is empty, from the socket within the read timeout: never more than `size`, so bytes past the
  /// body (a pipelined request) stay for the next request when the caller asks for no more than the
  /// body holds. Returns the bytes read (≥ 1), 0 or -1 when the client closed the connection, the
  /// read timed out or failed, or the thread processes no request. For a body cpp-httplib does not
  /// read itself (a chunked one, ChunkedBodyDecoder).
  static long read_body(char* out, std::size_t size);

  /// Called from a handler or hook (on the thread processing the request): once this request's
  /// answer is written, the connection ends, the lingering way (the client's further bytes — a body
  /// refused unread, the rest of a head not parsed — are read and discarded until it is silent for
  /// 2 s, at most 2 s in all, or 30 s when `body_may_follow`: a body it may still be uploading, so
  /// that a client that reads only once it has sent everything gets the answer rather than a
  /// reset; never read as a next request). The answer should say "Connection: close".
  /// cpp-httplib 0.11 would keep the connection.
  static void close_after_answer(bool body_may_follow = false);

  ~BoundedHttpServer() override;

  /// Starts the `threads` ≥ 1 HTTP workers (an HttpWorkerPool, which listen() takes as its task
  /// queue) and the parking of connections that wait for their client (idle between keep-alive
  /// requests, a request head not yet whole, a lingering close): such a connection is held by a
  /// ConnectionParking instead of a worker, and handed back to the workers once its head is here.
  /// At most `max_parked` wait at once; one more is closed. A connection whose request head is
  /// here stays parked while its body arrives (BodyWait), the bodies read ahead into buffers
  /// (counted until a worker has read them) holding at most `read_ahead_bytes` in all; a body
  /// past that is read by its worker, waiting on the client as without parking. The pool's shutdown (when listen()
  /// returns) closes what is parked first. Call once, before listening. Errors:
  /// kIo when the OS refuses a thread or the epoll watch, naming the count and its reason.
  /// Without it, cpp-httplib's own pool serves connections and each worker waits for its client.
  Status start_workers(std::size_t threads, std::size_t max_parked, std::size_t read_ahead_bytes = kReadAheadBytes);
  /// Connections parked now (0 without parking).
  std::size_t parked_connections() const;
  /// Bytes of request bodies read ahead into connections' buffers and not yet read by a worker
  /// (0 without parking).
  std::size_t read_ahead_bytes() const;

 private:
  class Connection;
  bool process_and_close_socket(socket_t sock) override;
  void serve(std::unique_ptr<Connection> c);
  /// Closes the parked connections, and from now on every one that would be parked: none is
  /// handed to the workers after this returns (their pool's before-shutdown step). Idempotent.
  void stop_parking();
  /// Whether a body that found no room in the read-ahead limit may go to a worker now (which
  /// then waits on its client): only while more than a quarter of the workers (at least 1) are
  /// idle, so that slow large bodies never take the workers every other request needs.
  bool may_hand_over_body() const;

  std::size_t max_head_bytes_;
  std::chrono::milliseconds head_timeout_;
  // (declared first: destroyed after the parking, whose parked connections give their bytes back)
  std::unique_ptr<ReadAheadBytes> read_ahead_;  // with parking: what bodies read ahead may hold
  std::unique_ptr<ConnectionParking> parking_;
  HttpWorkerPool* workers_ = nullptr;  // start_workers' (owned by cpp-httplib's listen)
  std::size_t reserved_workers_ = 0;         // idle workers may_hand_over_body() leaves
};

}  // namespace mamba::server
