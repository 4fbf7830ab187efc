#include "server/bounded_http_server.h"

#include "server/http_worker_pool.h"

#include <limits>
#include <optional>
#include <string_view>

#include <netdb.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mamba::server {

namespace {

thread_local HeadFault t_head_fault = HeadFault::kNone;
thread_local const char* t_fault_what = "";  // kMalformedLine: what is wrong with the line
thread_local std::size_t t_fault_line = 0;    // kMalformedLine: 1 = the first header line
thread_local bool t_close_after_answer = false;
thread_local bool t_body_may_follow = false;  // close_after_answer(true): the refused body may still be coming
enum class ConnectionChoice { kDefault, kKeep, kClose };  // set_keep_alive(), else cpp-httplib's reading
thread_local ConnectionChoice t_connection = ConnectionChoice::kDefault;
thread_local int t_socket = -1;
thread_local httplib::Stream* t_stream = nullptr;  // the connection's stream while a request is processed

/// poll() for `events` on `fd` for at most `ms` milliseconds; true when they (or a hang-up or an
/// error, which the next recv / send reports) came.
bool wait_for(int fd, short events, long ms) {
  pollfd p{fd, events, 0};
  int r;
  do {
    r = ::poll(&p, 1, static_cast<int>(ms));
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

/// The numeric address and port of socket `fd`'s peer (`peer`) or its own end, formatted as
/// cpp-httplib formats Request::remote_addr / local_addr ("127.0.0.1", "::1"). False (ip and port
/// untouched) for a socket that is not TCP over IPv4 / IPv6, or an error.
bool socket_endpoint(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  if ((peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) : getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len)) != 0)
    return false;
  if (sa.ss_family != AF_INET && sa.ss_family != AF_INET6) return false;
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&sa), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  ip = host;
  port = std::atoi(serv);
  return true;
}

/// How long and how much of a client's further bytes are read and dropped when its connection
/// ends with bytes unread (close_lingering): until the client is silent for kLingerIdleMs, for at
/// most kLingerMs in all — or, after an answer that refused a body the client may still be
/// uploading (close_after_answer(true)), kLingerBodyMs, as nginx's lingering_time: Python's
/// http.client / requests read the answer only once they have sent the whole body, and with 2 s
/// in all they met a reset instead of their 413.
constexpr int kLingerIdleMs = 2000;
constexpr int kLingerMs = 2000;
constexpr int kLingerBodyMs = 30000;
constexpr std::size_t kLingerBytes = std::size_t{1} << 30;

/// The stream's read-ahead buffer (cpp-httplib's SocketStream reads ahead 4 KiB too).
constexpr std::size_t kReadAhead = 4096;

/// The calling thread processes no request now (what head_fault() and current_socket() say then).
void clear_thread_state() {
  t_head_fault = HeadFault::kNone;
  t_fault_what = "";
  t_fault_line = 0;
  t_close_after_answer = false;
  t_body_may_follow = false;
  t_connection = ConnectionChoice::kDefault;
  t_socket = -1;
  t_stream = nullptr;
}

long to_ms(time_t sec, time_t usec) { return static_cast<long>(sec) * 1000 + static_cast<long>(usec) / 1000; }

/// One connection's socket as cpp-httplib reads and writes it (the same buffering and timeouts as
/// its own SocketStream), kept across the connection's requests, with the head checked as it is
/// read: from start_request() until the blank line that ends the head, a line reads as ended after
/// kMaxHeadLine + 1 bytes, the head after max_head bytes, a malformed header line at its fault
/// (read() returns 0, which cpp-httplib's line reader takes as the end of the line, then of the
/// input); a head the client leaves unfinished past its deadline is marked kIncomplete.
class HeadBoundedStream final : public httplib::Stream {
 public:
  /// `read_ahead`: what the buffer may hold past kReadAhead while a body is awaited (a head's own
  /// read-ahead, up to max_head + 1 bytes, is not counted while the head is read), shared by every
  /// connection (nullptr: it never grows past a head's read-ahead).
  HeadBoundedStream(int fd, long read_timeout_ms, long write_timeout_ms, std::size_t max_head, std::chrono::milliseconds head_timeout,
                    ReadAheadBytes* read_ahead)
      : fd_(fd), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms), max_head_(max_head),
        head_timeout_(head_timeout), checker_(max_head), read_ahead_(read_ahead) {}
  ~HeadBoundedStream() override { release_read_ahead(); }
  HeadBoundedStream(const HeadBoundedStream&) = delete;
  HeadBoundedStream& operator=(const HeadBoundedStream&) = delete;

  /// A new request's head begins with the next byte read.
  /// `first_byte`: when its first byte arrived (now, unless it was read ahead while parked).
  void start_request(std::chrono::steady_clock::time_point first_byte) {
    in_head_ = true;
    body_expired_ = false;
    head_deadline_ = first_byte + head_timeout_;
    checker_.reset();
    t_head_fault = HeadFault::kNone;
    t_fault_what = "";
    t_fault_line = 0;
    t_close_after_answer = false;
    t_body_may_follow = false;
    t_connection = ConnectionChoice::kDefault;
  }

  /// Whether bytes are here within `ms` (already buffered, or on the socket; an end of the
  /// connection counts: the read that follows sees it).
  bool wait_readable(long ms) const { return off_ < len_ || wait_for(fd_, POLLIN, ms); }
  /// Whether bytes the server has not read yet are here now (buffered or on the socket).
  bool input_pending() const { return wait_readable(0); }

  /// Drops the CR / LF bytes before a request line (RFC 9112 §2.2: a server SHOULD ignore at
  /// least one empty line there; some clients send a CRLF after a POST body). Call when
  /// wait_readable(): 1 when a request's first byte is here, 0 when only empty lines were, -1 at
  /// the end of the connection.
  int skip_empty_lines() {
    if (off_ == len_ && !fill(read_timeout_ms_)) return -1;
    while (off_ < len_ && (buf_[off_] == '\r' || buf_[off_] == '\n')) ++off_;
    return off_ < len_ ? 1 : 0;
  }

  /// Drops the CR / LF bytes buffered before a request line (as skip_empty_lines, without reading):
  /// whether a request's first byte is buffered.
  bool drop_buffered_empty_lines() {
    while (off_ < len_ && (buf_[off_] == '\r' || buf_[off_] == '\n')) ++off_;
    return off_ < len_;
  }

  /// Bytes read and not yet handed out.
  std::size_t buffered() const { return len_ - off_; }

  /// Gives back what pre_read() grew the buffer by, once the bytes left fit the usual read-ahead.
  void shrink() {
    growth_refused_ = false;
    if (buf_.size() <= kReadAhead || buffered() > kReadAhead) return;
    std::memmove(buf_.data(), buf_.data() + off_, len_ - off_);
    len_ -= off_;
    off_ = 0;
    buf_.resize(kReadAhead);
    buf_.shrink_to_fit();
    release_read_ahead();
  }

  /// Drops the buffered bytes and the buffer's growth (a connection ending: what its client still
  /// sends is read and dropped from the socket, never from here).
  void discard_buffered() {
    std::vector<char>(kReadAhead).swap(buf_);
    off_ = len_ = 0;
    release_read_ahead();
  }

  /// Whether the last pre_read() stopped with the buffer full because the shared read-ahead
  /// limit refused it more room (the rest of the body then stays on the socket).
  bool growth_refused() const { return growth_refused_; }

  /// Whether the shared read-ahead limit has room now for the buffer's next growth toward
  /// `body_cap` (pre_read's bound).
  bool growth_room(std::size_t body_cap) const {
    const std::size_t cap = std::max(head_cap(), body_cap);
    if (buf_.size() >= cap || read_ahead_ == nullptr) return false;
    const std::size_t next = std::min(cap, buf_.size() * 2);
    const std::size_t free = uncounted(body_cap);
    if (next <= free || next - free <= charged_) return true;
    return read_ahead_->limit() - read_ahead_->held() >= next - free - charged_;
  }

  /// Bytes the client has sent that the socket holds unread (0 on an error).
  std::size_t socket_pending() const {
    int n = 0;
    return ::ioctl(fd_, FIONREAD, &n) == 0 && n > 0 ? static_cast<std::size_t>(n) : 0;
  }

  /// Whether reading the head from the buffered bytes (a request's first byte on) would not wait:
  /// they hold its end, or a byte `scan` (a checker of its own, reset when the head began) finds
  /// past a bound or malformed — the checker that reads the head fails at the same byte — or a
  /// request line cpp-httplib refuses (it answers once the line is read). Each call looks at the
  /// bytes that arrived since the last (`scanned`: bytes past off_ already looked at).
  /// `head_len` is set to the head's bytes (from off_, its blank line's LF included) when the
  /// decision is the head's end, to 0 when it is a fault or a refused request line.
  bool head_decidable(HeadChecker& scan, std::size_t& scanned, std::size_t& head_len) const {
    head_len = 0;
    for (std::size_t i = off_ + scanned; i < len_; ++i) {
      char c = buf_[i];  // (a copy: the checker may rewrite it)
      const HeadChecker::Step step = scan.check(c);
      if (step != HeadChecker::Step::kMore || scan.request_line_refused()) {
        if (step == HeadChecker::Step::kEnd && !scan.request_line_refused()) head_len = i - off_ + 1;
        return true;
      }
    }
    scanned = buffered();
    return false;
  }

  /// The buffered bytes not yet handed out.
  std::string_view buffered_view() const { return {buf_.data() + off_, len_ - off_}; }
  long read_timeout_ms() const { return read_timeout_ms_; }

  /// The client was silent for the read timeout while its parked body was awaited: the next read
  /// that would wait for the socket fails at once (as it would have after waiting that long) — for
  /// the request begun last (start_request() clears it).
  void expire_body_reads() { body_expired_ = true; }

  /// What pre_read() found on the socket.
  enum class PreRead { kData, kNothing, kEnd };

  /// Reads what the socket has now without waiting, appended to the buffer (grown up to
  /// max_head_ + 1 bytes past off_, so that a head over its bound is decided by the bytes here):
  /// kEnd at the end of the connection or an error, kNothing when nothing came (or the buffer is full).
  /// `body_cap`: while a parked request's body is awaited, the bytes (from the head's first) it
  /// may take in all, head and body (0 otherwise).
  PreRead pre_read(std::size_t body_cap) {
    if (off_ > 0) {  // keep the unread bytes at the front
      std::memmove(buf_.data(), buf_.data() + off_, len_ - off_);
      len_ -= off_;
      off_ = 0;
    }
    const std::size_t cap = std::max(head_cap(), body_cap);
    bool got = false;
    growth_refused_ = false;
    // While a body is awaited, what its buffer holds past the usual read-ahead counts (a head's
    // read-ahead, grown before, counts from now on): a body could hold it as long as its client trickles.
    if (!charge_read_ahead(buf_.size(), uncounted(body_cap))) {
      growth_refused_ = true;
      return PreRead::kNothing;
    }
    for (;;) {
      if (len_ == buf_.size()) {
        if (buf_.size() >= cap) return got ? PreRead::kData : PreRead::kNothing;
        const std::size_t next = std::min(cap, buf_.size() * 2);
        if (!charge_read_ahead(next, uncounted(body_cap))) {  // counted before it is allocated: past the limit nothing more is read
          growth_refused_ = true;
          return got ? PreRead::kData : PreRead::kNothing;
        }
        buf_.resize(next);
      }
      ssize_t n;
      do {
        n = ::recv(fd_, buf_.data() + len_, buf_.size() - len_, MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return PreRead::kEnd;
      if (n < 0) return got ? PreRead::kData : PreRead::kNothing;
      len_ += static_cast<std::size_t>(n);
      got = true;
    }
  }

  bool is_readable() const override { return wait_readable(body_expired_ && !in_head_ ? 0L : read_timeout_ms_); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, write_timeout_ms_); }

  ssize_t read(char* ptr, std::size_t size) override {
    if (size == 0) return 0;
    if (in_head_) {
      if (t_head_fault != HeadFault::kNone) return 0;
      // A request line cpp-httplib refuses whatever follows is handed out as far as its bytes are
      // here, never waited for (junk such as a TLS hello may send no line end): cpp-httplib then
      // answers 400, naming the fault when the whole line came.
      if (checker_.request_line_refused() && off_ == len_ && !fill(0)) return 0;
      size = 1;  // the head is read a byte at a time (cpp-httplib's line reader asks for one): check each
    }
    if (off_ == len_) {
      if (!in_head_ && size >= buf_.size()) {  // a large body read: straight into the caller's buffer
        if (!wait_readable(body_expired_ ? 0L : read_timeout_ms_)) return -1;
        return receive(ptr, size);
      }
      // the head's bytes wait at most until its deadline, the body's the read timeout
      const long head_left = static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(head_deadline_ - std::chrono::steady_clock::now()).count());
      if (!fill(in_head_ ? std::clamp(head_left, 0L, read_timeout_ms_) : body_expired_ ? 0L : read_timeout_ms_)) {
        if (in_head_) t_head_fault = HeadFault::kIncomplete;
        return in_head_ ? 0 : -1;
      }
    }
    const std::size_t n = std::min(size, len_ - off_);
    if (in_head_) {  // one byte, checked (and maybe rewritten: HeadChecker::check)
      const HeadChecker::Step step = checker_.check(buf_[off_]);
      if (step == HeadChecker::Step::kFault) {
        t_head_fault = checker_.fault();
        t_fault_what = checker_.fault_what();
        t_fault_line = checker_.fault_line();
        return 0;
      }
      if (step == HeadChecker::Step::kEnd) in_head_ = false;
    }
    std::memcpy(ptr, buf_.data() + off_, n);
    off_ += n;
    if (off_ == len_ && buf_.size() > kReadAhead) discard_buffered();  // a parked body, all handed out: its buffer goes now, not after the answer
    return static_cast<ssize_t>(n);
  }

  /// Sends what the socket takes now, after waiting at most the write timeout for room: a client
  /// that stops reading ends the answer one write timeout after it stopped. (A blocking send of a
  /// large answer waited for the socket's own send timeout on top: 60 s, not 30.)
  ssize_t write(const char* ptr, std::size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;  // no room after all: the caller writes again
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { socket_endpoint(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { socket_endpoint(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }

 private:
  ssize_t receive(char* ptr, std::size_t size) {
    ssize_t n;
    do {
      n = ::recv(fd_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  /// What the buffer grows to while a head is read ahead (bounded per connection, and in time by
  /// the head's deadline).
  std::size_t head_cap() const { return std::max(kReadAhead, max_head_ + 1); }
  /// The bytes of a buffer not counted against the shared limit: a head's read-ahead, or only the
  /// usual read-ahead while a body is awaited (`body_cap` > 0, pre_read's).
  std::size_t uncounted(std::size_t body_cap) const { return body_cap > 0 ? kReadAhead : head_cap(); }

  /// Counts a buffer of `size` bytes against the shared read-ahead limit (what it holds past
  /// `free`): false, nothing more counted, when the limit has no room for it.
  bool charge_read_ahead(std::size_t size, std::size_t free) {
    if (size <= free) return true;
    const std::size_t want = size - free;
    if (want <= charged_) return true;
    if (read_ahead_ == nullptr || !read_ahead_->take(want - charged_)) return false;
    charged_ = want;
    return true;
  }
  void release_read_ahead() {
    if (charged_ > 0) read_ahead_->release(charged_);
    charged_ = 0;
  }

  /// Refills the empty buffer, waiting at most `ms`; false at the end of the connection, an error
  /// or the timeout.
  bool fill(long ms) {
    if (!wait_readable(ms)) return false;
    const ssize_t n = receive(buf_.data(), buf_.size());
    if (n <= 0) return false;
    off_ = 0;
    len_ = static_cast<std::size_t>(n);
    return true;
  }

  int fd_;
  long read_timeout_ms_;
  long write_timeout_ms_;
  std::size_t max_head_;
  std::chrono::milliseconds head_timeout_;
  std::chrono::steady_clock::time_point head_deadline_{};
  std::vector<char> buf_ = std::vector<char>(kReadAhead);  // grows while a parked head is read ahead (pre_read)
  std::size_t off_ = 0, len_ = 0;
  bool in_head_ = false;
  bool body_expired_ = false;  // expire_body_reads()
  bool growth_refused_ = false;  // growth_refused()
  HeadChecker checker_;  // the head being handed out
  ReadAheadBytes* read_ahead_;  // the shared limit on bodies' buffers (may be null)
  std::size_t charged_ = 0;     // what this buffer holds of it
};

}  // namespace

void close_lingering(int fd, int idle_ms, int max_ms, std::size_t max_bytes) {
  ::shutdown(fd, SHUT_WR);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  char buf[16384];
  for (std::size_t drained = 0; drained < max_bytes;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(std::min<long long>(left, idle_ms))) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;  // the client closed (or an error)
    drained += static_cast<std::size_t>(n);
  }
  ::shutdown(fd, SHUT_RD);
}

BoundedHttpServer::BoundedHttpServer(std::size_t max_head_bytes, std::chrono::milliseconds head_timeout)
    : max_head_bytes_(std::max(max_head_bytes, kMaxHeadLine + 1)), head_timeout_(head_timeout) {}

HeadFault BoundedHttpServer::head_fault() { return t_head_fault; }

std::string BoundedHttpServer::head_fault_detail() {
  if (t_head_fault != HeadFault::kMalformedLine) return "";
  return (t_fault_line == 0 ? std::string("the request line") : "header line " + std::to_string(t_fault_line)) + " " + t_fault_what;
}

void BoundedHttpServer::close_after_answer(bool body_may_follow) {
  t_close_after_answer = true;
  t_body_may_follow = t_body_may_follow || body_may_follow;
}

void BoundedHttpServer::set_keep_alive(bool keep) { t_connection = keep ? ConnectionChoice::kKeep : ConnectionChoice::kClose; }

int BoundedHttpServer::current_socket() { return t_socket; }

long BoundedHttpServer::read_body(char* out, std::size_t size) {
  if (t_stream == nullptr) return -1;
  return static_cast<long>(t_stream->read(out, size));
}

std::string BoundedHttpServer::current_peer_address() {
  std::string ip;
  int port = 0;
  return t_socket >= 0 && socket_endpoint(t_socket, true, ip, port) ? ip : std::string();
}

/// One connection: its stream (kept across its requests) and where it stands between them. Parked
/// (ConnectionParking) while its client has not sent a whole request head; destroying it closes
/// the socket.
class BoundedHttpServer::Connection final : public ParkedConnection {
 public:
  /// `read_ahead`: what buffers may hold of bodies read ahead, shared by every connection (nullptr:
  /// a parked connection is handed to a worker once its head is here, its body unread).
  /// `server`: asked whether a body that finds no room may go to a worker (may_hand_over_body).
  Connection(int fd, std::size_t requests, long read_timeout_ms, long write_timeout_ms, std::size_t max_head,
             std::chrono::milliseconds head_timeout, std::size_t max_body, ReadAheadBytes* read_ahead,
             const BoundedHttpServer* server)
      : strm(fd, read_timeout_ms, write_timeout_ms, max_head, head_timeout, read_ahead), left(requests), fd_(fd),
        head_timeout_(head_timeout), scan_(max_head), max_body_(max_body), await_bodies_(read_ahead != nullptr), server_(server) {}
  ~Connection() override {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
  }

  int fd() const override { return fd_; }

  /// Waits for the next request from now on: its first byte is due by `idle_deadline`.
  void await_request(std::chrono::steady_clock::time_point idle_deadline) {
    strm.shrink();
    started = false;
    deadline_ = idle_deadline;
  }

  /// What the buffered bytes call for: kResume once a request's whole head is here (or enough of
  /// it for its bounds to decide), kWait otherwise. A request's first byte (after empty lines)
  /// starts its head's deadline.
  /// Once the head is whole and frames a body (BodyWait), kResume waits for the body too: until
  /// it is all here, or the client is silent for the read timeout. When the shared read-ahead
  /// limit has no room for more of it, a worker reads the rest (waiting on the client as before;
  /// what the buffer holds stays counted until it is read) if more than a reserve of the workers
  /// is idle; else the connection stops reading (wants_input) until there is room or a worker.
  Next evaluate(std::chrono::steady_clock::time_point now) {
    if (!started) {
      if (!strm.drop_buffered_empty_lines()) return Next::kWait;
      started = true;
      first_byte = now;
      deadline_ = now + head_timeout_;
      scan_.reset();
      scanned_ = 0;
      body_.reset();
      body_late_ = false;
    }
    if (!body_) {
      std::size_t head_len = 0;
      if (!strm.head_decidable(scan_, scanned_, head_len)) return Next::kWait;
      if (head_len == 0 || !await_bodies_) return Next::kResume;  // a fault, or no body parking
      body_.emplace(strm.buffered_view().substr(0, head_len), max_body_);
      if (!body_->wanted()) return Next::kResume;
      head_len_ = head_len;
      body_seen_ = head_len;
      deadline_ = now + std::chrono::milliseconds(strm.read_timeout_ms());
    }
    if (body_->decided()) return Next::kResume;
    if (strm.buffered() > body_seen_) {  // the body's bytes that came since the last look
      body_->feed(strm.buffered_view().substr(body_seen_));
      body_seen_ = strm.buffered();
      deadline_ = now + std::chrono::milliseconds(strm.read_timeout_ms());
    }
    if (body_->decided()) return Next::kResume;
    if (!strm.growth_refused()) return Next::kWait;
    if (server_->may_hand_over_body()) return Next::kResume;
    paused_ = true;
    pending_seen_ = strm.socket_pending();
    return Next::kWait;
  }

  /// False while a body that found no room waits for room or an idle worker (its client's bytes
  /// wait in the kernel meanwhile; while more of them arrive the client counts as not silent).
  bool wants_input() override {
    if (!paused_) return true;
    if (strm.growth_room(body_cap()) || server_->may_hand_over_body()) {
      paused_ = false;
      return true;
    }
    // (looked at once a second, not every tick: one system call per paused connection each time)
    if (const auto now = std::chrono::steady_clock::now(); now - pending_checked_ >= std::chrono::seconds(1)) {
      pending_checked_ = now;
      if (const std::size_t pending = strm.socket_pending(); pending > pending_seen_) {
        pending_seen_ = pending;
        deadline_ = now + std::chrono::milliseconds(strm.read_timeout_ms());
      }
    }
    return false;
  }

  /// The most bytes a parked connection's buffer may hold now (pre_read's bound): the head and the
  /// most its body may still need while one is awaited, else 0 (the head's own bound).
  std::size_t body_cap() const {
    if (!body_ || body_->decided()) return 0;
    const std::uint64_t cap = head_len_ + body_->fed() + body_->max_more();
    return static_cast<std::size_t>(std::min<std::uint64_t>(cap, std::numeric_limits<std::size_t>::max()));
  }

  /// Whether the client went silent past the read timeout while its body was awaited (then its
  /// worker's reads fail at once: HeadBoundedStream::expire_body_reads).
  bool body_late() const { return body_late_; }

  /// Ends the connection the lingering way while parked (close_lingering's loop, without a
  /// thread): the answer was written, the client's further bytes are read and dropped until it
  /// closes, `max_bytes` came, it sent nothing for `idle_ms`, or `max_ms` passed.
  void linger(int idle_ms, int max_ms, std::size_t max_bytes) {
    ::shutdown(fd_, SHUT_WR);
    lingering_ = true;
    linger_left_ = max_bytes;
    linger_idle_ = std::chrono::milliseconds(idle_ms);
    const auto now = std::chrono::steady_clock::now();
    linger_end_ = now + std::chrono::milliseconds(max_ms);
    deadline_ = std::min(now + linger_idle_, linger_end_);
  }

  Next on_readable() override {
    if (lingering_) {
      char buf[16384];
      for (int reads = 0; reads < 16; ++reads) {  // at most 256 KiB per call: the other parked connections wait meanwhile
        const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Next::kWait;
        if (n <= 0 || static_cast<std::size_t>(n) >= linger_left_) return Next::kClose;  // the client closed, or enough
        linger_left_ -= static_cast<std::size_t>(n);
        deadline_ = std::min(std::chrono::steady_clock::now() + linger_idle_, linger_end_);  // bytes came: idle anew
      }
      return Next::kWait;
    }
    if (paused_) {  // its end (or an error) while its input was not read: a worker reads what is left
      paused_ = false;
      return Next::kResume;
    }
    const HeadBoundedStream::PreRead r = strm.pre_read(body_cap());
    const Next next = evaluate(std::chrono::steady_clock::now());
    // At the end of the connection a begun head goes to a worker (which answers it, as it would
    // have read it: incomplete), an idle connection just ends.
    if (r == HeadBoundedStream::PreRead::kEnd) return started ? Next::kResume : Next::kClose;
    return next;
  }
  std::chrono::steady_clock::time_point deadline() const override { return deadline_; }
  /// Past its deadline an idle connection ends (a keep-alive timeout); a begun head goes to a
  /// worker, which finds its deadline passed and answers 400 (HeadFault::kIncomplete).
  /// A body awaited past its read timeout goes to a worker too, which answers it at once.
  Next at_deadline() override {
    if (body_ && !body_->decided()) body_late_ = true;
    return started && !lingering_ ? Next::kResume : Next::kClose;
  }

  bool lingering() const { return lingering_; }

  HeadBoundedStream strm;
  std::size_t left;  // requests this connection may still make (the keep-alive count)
  bool started = false;  // a request's first byte is buffered (first_byte: when it arrived)
  std::chrono::steady_clock::time_point first_byte{};

 private:
  int fd_;
  std::chrono::milliseconds head_timeout_;
  std::chrono::steady_clock::time_point deadline_{};
  HeadChecker scan_;         // the parked head's bytes as they arrive (HeadBoundedStream::head_decidable)
  std::size_t scanned_ = 0;  // how many of them it has looked at
  std::size_t max_body_;
  bool await_bodies_;
  const BoundedHttpServer* server_;
  bool paused_ = false;           // wants_input() false: a body waiting for room or a worker
  std::size_t pending_seen_ = 0;  // while paused: the most bytes seen waiting on its socket
  std::chrono::steady_clock::time_point pending_checked_{};  // when pending_seen_ was last looked at
  std::optional<BodyWait> body_;  // the parked request's body, once its head is whole
  std::size_t head_len_ = 0;      // that head's bytes (from the stream's unread bytes' start)
  std::size_t body_seen_ = 0;     // buffered bytes (head included) body_ has looked at
  bool body_late_ = false;        // body_late()
  bool lingering_ = false;   // linger() was called: the connection is ending
  std::size_t linger_left_ = 0;
  std::chrono::milliseconds linger_idle_{0};
  std::chrono::steady_clock::time_point linger_end_{};
};

BoundedHttpServer::~BoundedHttpServer() = default;

Status BoundedHttpServer::start_workers(std::size_t threads, std::size_t max_parked, std::size_t read_ahead_bytes) {
  auto pool = HttpWorkerPool::create(threads);
  if (!pool.ok()) return pool.error();
  HttpWorkerPool* workers = pool->get();
  workers_ = workers;
  reserved_workers_ = std::max<std::size_t>(1, threads / 4);
  auto parking = ConnectionParking::create(
      [this, workers](std::unique_ptr<ParkedConnection> c) {
        Connection* raw = static_cast<Connection*>(c.release());
        workers->enqueue([this, raw] { serve(std::unique_ptr<Connection>(raw)); });
      },
      max_parked);
  if (!parking.ok()) return parking.error();
  parking_ = std::move(*parking);
  read_ahead_ = std::make_unique<ReadAheadBytes>(read_ahead_bytes);
  workers->set_before_shutdown([this] { stop_parking(); });
  new_task_queue = [p = pool->release()]() mutable -> httplib::TaskQueue* { return std::exchange(p, nullptr); };
  return {};
}

void BoundedHttpServer::stop_parking() {
  if (parking_) parking_->close_all();
}

std::size_t BoundedHttpServer::parked_connections() const { return parking_ ? parking_->parked() : 0; }

std::size_t BoundedHttpServer::read_ahead_bytes() const { return read_ahead_ ? read_ahead_->held() : 0; }

bool BoundedHttpServer::may_hand_over_body() const { return workers_ != nullptr && workers_->idle() > reserved_workers_; }

bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  serve(std::make_unique<Connection>(sock, keep_alive_max_count_, to_ms(read_timeout_sec_, read_timeout_usec_),
                                     to_ms(write_timeout_sec_, write_timeout_usec_), max_head_bytes_, head_timeout_,
                                     payload_max_length_, read_ahead_.get(), this));
  return true;
}

// cpp-httplib 0.11's loop (detail::process_server_socket): at most keep_alive_max_count_ requests,
// each awaited for keep_alive_timeout_sec_, the last one answered with "Connection: close". Ours
// also skips empty lines before a request, ends after an answer marked by close_after_answer() or
// to a head cut short, keeps or ends the connection as set_keep_alive() says when it was called,
// and ends it the lingering way whenever the client's bytes are still coming. While it waits for a
// request's head it is parked (start_workers: the worker returns, and a worker takes it
// up again once the head is here); without parking the worker waits, looking at the server's stop
// every 100 ms.
void BoundedHttpServer::serve(std::unique_ptr<Connection> c) {
  HeadBoundedStream& strm = c->strm;
  t_socket = c->fd();
  t_stream = &strm;
  for (; c->left > 0; --c->left) {
    if (!c->started) {
      // the next request's first byte, within the keep-alive timeout (empty lines do not extend it)
      const auto now = std::chrono::steady_clock::now();
      const auto deadline = now + std::chrono::seconds(keep_alive_timeout_sec_);
      if (parking_) {
        c->await_request(deadline);
        if (c->evaluate(now) == ParkedConnection::Next::kWait) {
          clear_thread_state();
          parking_->park(std::move(c));
          return;
        }
      } else {
        int arrived = 0;
        while (arrived == 0 && svr_sock_ != INVALID_SOCKET && std::chrono::steady_clock::now() <= deadline)
          if (strm.wait_readable(100)) arrived = strm.skip_empty_lines();
        if (arrived != 1) break;
        c->first_byte = std::chrono::steady_clock::now();
      }
    }
    if (svr_sock_ == INVALID_SOCKET) break;
    c->started = false;
    strm.start_request(c->first_byte);
    if (c->body_late()) strm.expire_body_reads();
    bool connection_closed = false;
    const bool ok = process_request(strm, c->left == 1, connection_closed, nullptr);
    const bool refused = t_close_after_answer || t_head_fault != HeadFault::kNone;
    const bool close = t_connection == ConnectionChoice::kClose || (t_connection == ConnectionChoice::kDefault && connection_closed);
    if (refused || close || !ok || c->left == 1) {
      // Bytes still coming (a refused body, the head's rest, requests past the keep-alive count)
      // are read and dropped, so that they are never a request and the answers sent are not lost
      // to the reset that closing with unread bytes sends.
      if (refused || strm.input_pending()) {
        strm.discard_buffered();  // (a refused body read ahead: up to 8 MiB, not kept while the client lingers)
        if (parking_) {  // the client's bytes are awaited without a thread
          c->linger(kLingerIdleMs, t_body_may_follow ? kLingerBodyMs : kLingerMs, kLingerBytes);
          break;
        }
        close_lingering(c->fd(), kLingerIdleMs, t_body_may_follow ? kLingerBodyMs : kLingerMs, kLingerBytes);
      }
      break;
    }
  }
  clear_thread_state();
  if (c->lingering()) parking_->park(std::move(c));
  // otherwise `c` is destroyed: the socket closes
}

}  // namespace mamba::server
