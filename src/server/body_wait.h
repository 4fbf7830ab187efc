// BodyWait: whether a parked connection's request body has all arrived, so that the worker that
// takes it up reads the whole request from memory and never waits on its client.
//
// ConnectionParking holds a connection without a thread while its client sends a request head
// (BoundedHttpServer). A body that trickled in after the head held its worker for as long as the
// client took (each read within the 10 s read timeout, no overall bound): 170 such connections left
// no worker for /health. The parking now keeps such a connection until its body is here too, as
// uvicorn (vLLM) and axum (TGI) read a body without blocking a thread on it.
//
// Only a readiness test: the worker still reads the body by cpp-httplib's rules and the server's
// (the pre-routing checks, ChunkedBodyDecoder). Where this reads the head otherwise — any request
// the server refuses before its body, a framing it does not expect — it hands the connection over
// at once (wanted() false, or decided() once the bytes say so), which is only what happened before:
// a worker reading a body that is not all here. So it never changes an answer, only when a worker
// begins.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/chunked_body.h"

namespace mamba::server {

class BodyWait {
 public:
  /// Reads the framing of a whole request head (`head`: its request line up to and including the
  /// blank line's LF, as HeadChecker accepted it). A body is awaited (wanted()) for
  ///  - "Content-Length: N", 0 < N ≤ `max_body_bytes` (several equal Content-Length lines count as
  ///    one; disagreeing ones, which the server refuses unread, do not), without Transfer-Encoding;
  ///  - "Transfer-Encoding: chunked" alone on a POST in HTTP/1.1, without Content-Length;
  /// and never for a GET or HEAD, a request with an Expect header (its client waits for "100
  /// Continue" before it sends the body), or anything else (the server answers those unread).
  BodyWait(std::string_view head, std::size_t max_body_bytes);

  /// Whether the connection should stay parked until its body is here.
  bool wanted() const { return wanted_; }

  /// Looks at the body's next bytes (those after the head, in order, each exactly once). Returns
  /// decided().
  bool feed(std::string_view more);

  /// True once a worker reading the body would not wait: all of it is here (a Content-Length's
  /// bytes; a chunked body's last chunk and trailer), or the chunked bytes so far are already
  /// malformed or over the limit (the worker answers 413 / 400 at the same byte), or a chunked
  /// body's raw bytes passed max_body_bytes + kChunkedSlack (its framing around 1-byte chunks can
  /// be several times its data: past that the worker reads the rest, as before). Also true when
  /// !wanted().
  bool decided() const { return decided_; }

  /// Bytes of memory it holds besides itself (its scratch buffer for decoded chunk data: at most
  /// a slice of 16 KiB, however large the pieces fed).
  std::size_t scratch_bytes() const { return scratch_.capacity(); }

  /// Raw body bytes (framing included) fed so far.
  std::uint64_t fed() const { return fed_; }

  /// The most raw bytes it may still look at before it is decided (a Content-Length's rest; a
  /// chunked body's max_body_bytes + kChunkedSlack less what came; 0 once decided): the caller's
  /// read-ahead bound.
  std::uint64_t max_more() const;

  /// Raw bytes of a chunked body awaited past its data limit (its size lines, CRLFs, extensions and
  /// trailer; the decoder bounds extensions to 64 KiB and the trailer to 8 KiB).
  static constexpr std::uint64_t kChunkedSlack = std::uint64_t{1} << 20;

 private:
  bool wanted_ = false;
  bool decided_ = true;
  bool chunked_ = false;
  std::uint64_t length_ = 0;  // Content-Length
  std::uint64_t fed_ = 0;
  std::uint64_t max_raw_ = 0;  // chunked: raw bytes awaited at most
  ChunkedBodyDecoder decoder_;
  static constexpr std::size_t kSlice = 16384;  // bytes decoded at a time (scratch_'s capacity at most)
  std::string scratch_;  // the decoder's output, dropped (only where the body ends matters here)
};

/// The bytes connections' buffers hold of request bodies read ahead (while parked, until a worker
/// has read them), against a limit; shared by every connection of a server (any thread).
class ReadAheadBytes {
 public:
  explicit ReadAheadBytes(std::size_t limit) : limit_(limit) {}
  /// Takes `bytes` more if the total stays within the limit; false (nothing taken) otherwise.
  bool take(std::size_t bytes);
  /// Gives back `bytes` taken earlier.
  void release(std::size_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }
  std::size_t held() const { return held_.load(std::memory_order_relaxed); }
  std::size_t limit() const { return limit_; }

 private:
  std::size_t limit_;
  std::atomic<std::size_t> held_{0};
};

}  // namespace mamba::server
