#include "server/bounded_http_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

namespace mamba::server {

namespace {

thread_local HeadFault t_head_fault = HeadFault::kNone;
thread_local const char* t_fault_what = "";  // kMalformedLine: what is wrong with the line
thread_local std::size_t t_fault_line = 0;    // kMalformedLine: 1 = the first header line
thread_local bool t_close_after_answer = false;
enum class ConnectionChoice { kDefault, kKeep, kClose };  // set_keep_alive(), else cpp-httplib's reading
thread_local ConnectionChoice t_connection = ConnectionChoice::kDefault;
thread_local int t_socket = -1;

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

long to_ms(time_t sec, time_t usec) { return static_cast<long>(sec) * 1000 + static_cast<long>(usec) / 1000; }

/// One connection's socket as cpp-httplib reads and writes it (the same buffering and timeouts as
/// its own SocketStream), kept across the connection's requests, with the head checked as it is
/// read: from start_request() until the blank line that ends the head, a line reads as ended after
/// kMaxHeadLine + 1 bytes, the head after max_head bytes, a malformed header line at its fault
/// (read() returns 0, which cpp-httplib's line reader takes as the end of the line, then of the
/// input); a head the client leaves unfinished past its deadline is marked kIncomplete.
class HeadBoundedStream final : public httplib::Stream {
 public:
  HeadBoundedStream(int fd, long read_timeout_ms, long write_timeout_ms, std::size_t max_head, std::chrono::milliseconds head_timeout)
      : fd_(fd), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms), max_head_(max_head),
        head_timeout_(head_timeout) {}

  /// A new request's head begins with the next byte read.
  void start_request() {
    in_head_ = true;
    head_deadline_ = std::chrono::steady_clock::now() + head_timeout_;
    head_bytes_ = line_bytes_ = line_ = 0;
    line_state_ = kLineStart;
    http10_ = false;
    version_.fill('\0');
    t_head_fault = HeadFault::kNone;
    t_fault_what = "";
    t_fault_line = 0;
    t_close_after_answer = false;
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

  bool is_readable() const override { return wait_readable(read_timeout_ms_); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, write_timeout_ms_); }

  ssize_t read(char* ptr, std::size_t size) override {
    if (size == 0) return 0;
    if (in_head_) {
      if (t_head_fault != HeadFault::kNone) return 0;
      size = 1;  // the head is read a byte at a time (cpp-httplib's line reader asks for one): check each
    }
    if (off_ == len_) {
      if (!in_head_ && size >= buf_.size()) {  // a large body read: straight into the caller's buffer
        if (!is_readable()) return -1;
        return receive(ptr, size);
      }
      // the head's bytes wait at most until its deadline, the body's the read timeout
      const long head_left = static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(head_deadline_ - std::chrono::steady_clock::now()).count());
      if (!fill(in_head_ ? std::clamp(head_left, 0L, read_timeout_ms_) : read_timeout_ms_)) {
        if (in_head_) t_head_fault = HeadFault::kIncomplete;
        return in_head_ ? 0 : -1;
      }
    }
    const std::size_t n = std::min(size, len_ - off_);
    if (in_head_ && !check_head_byte(buf_[off_])) return 0;  // (may rewrite the byte: see check_head_byte)
    std::memcpy(ptr, buf_.data() + off_, n);
    off_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, std::size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
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

  bool malformed(const char* what) {
    t_head_fault = HeadFault::kMalformedLine;
    t_fault_what = what;
    t_fault_line = line_;
    return false;
  }

  /// Checks one byte of the head, about to be handed out; false (and t_head_fault set) when it is
  /// past a bound or makes its header line malformed. Line 0 is the request line (cpp-httplib
  /// parses it); a header line is NAME ':' VALUE CRLF, NAME without whitespace, VALUE without NUL,
  /// and not empty for Content-Length and Transfer-Encoding (cpp-httplib drops a header with an
  /// empty value: "Content-Length: 0" + "Content-Length:" was one length, and the body a second
  /// request). The head ends at a line that is "\r\n" alone. An Expect value is handed out in
  /// lower case (cpp-httplib matches "100-continue" case-sensitively; RFC 9110 §10.1.1 makes it
  /// case-insensitive), and as 'x's for an HTTP/1.0 request, whose expectation a server must ignore.
  bool check_head_byte(char& c) {
    if (++head_bytes_ > max_head_) {
      t_head_fault = HeadFault::kTooLong;
      return false;
    }
    if (++line_bytes_ > BoundedHttpServer::kMaxHeadLine + 1) {
      t_head_fault = HeadFault::kLineTooLong;
      return false;
    }
    const bool header = line_ > 0;
    switch (line_state_) {
      case kLineStart:
        if (c == '\r') {
          line_state_ = kBlankCr;
        } else if (header && (c == ' ' || c == '\t')) {
          return malformed("starts with whitespace (a folded line, which RFC 9112 §5.2 obsoletes)");
        } else if (header && (c == ':' || c == '\n')) {
          return malformed(c == ':' ? "has an empty name" : "ends in a bare LF");
        } else {
          line_state_ = header ? kName : kValue;  // the request line has no name: cpp-httplib reads it
          name_.clear();
          if (header) name_ += lower(c);
          if (c == '\n') return end_line();
          if (!header) note_request_line_byte(c);
        }
        break;
      case kBlankCr:
        if (c == '\n') {  // "\r\n" alone: the blank line (or an empty request line, which cpp-httplib refuses)
          in_head_ = false;
          return true;
        }
        if (header) return malformed("has a CR that does not end it");
        line_state_ = kValue;
        note_request_line_byte(c);  // (the request line's: a header line returned above)
        break;
      case kName:
        if (c == ':') {
          line_state_ = kValue;
          value_blank_ = true;
        } else if (c == ' ' || c == '\t') {
          return malformed("has whitespace before its ':' (RFC 9112 §5.1)");
        } else if (c == '\r' || c == '\n') {
          return malformed("has no ':'");
        } else if (name_.size() < 32) {
          name_ += lower(c);
        }
        break;
      case kValue:
        if (c == '\r') {
          line_state_ = kValueCr;
        } else if (c == '\n') {
          return header ? malformed("ends in a bare LF") : end_line();
        } else if (header) {
          if (c == '\0') return malformed("holds a NUL byte (RFC 9110 §5.5)");
          if (c != ' ' && c != '\t') value_blank_ = false;
          if (name_ == "expect") c = http10_ ? 'x' : lower(c);
        } else {
          note_request_line_byte(c);
        }
        break;
      case kValueCr:
        if (c == '\n') {
          if (header && value_blank_ && (name_ == "content-length" || name_ == "transfer-encoding"))
            return malformed(name_ == "content-length" ? "is a Content-Length without a value"
                                                       : "is a Transfer-Encoding without a value");
          return end_line();
        }
        if (header) return malformed("has a CR that does not end it");
        line_state_ = c == '\r' ? kValueCr : kValue;
        if (c != '\r') note_request_line_byte(c);  // (the request line's: a header line returned above)
        break;
    }
    return true;
  }

  static char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

  /// Keeps the request line's last 8 bytes: whether it ends in "HTTP/1.0".
  void note_request_line_byte(char c) {
    std::memmove(version_.data(), version_.data() + 1, version_.size() - 1);
    version_.back() = c;
    http10_ = std::memcmp(version_.data(), "HTTP/1.0", 8) == 0;
  }

  bool end_line() {
    ++line_;
    line_bytes_ = 0;
    line_state_ = kLineStart;
    return true;
  }

  enum LineState { kLineStart, kBlankCr, kName, kValue, kValueCr };

  int fd_;
  long read_timeout_ms_;
  long write_timeout_ms_;
  std::size_t max_head_;
  std::chrono::milliseconds head_timeout_;
  std::chrono::steady_clock::time_point head_deadline_{};
  std::array<char, 4096> buf_{};  // cpp-httplib's SocketStream reads ahead 4 KiB too
  std::size_t off_ = 0, len_ = 0;
  bool in_head_ = false;
  std::size_t head_bytes_ = 0, line_bytes_ = 0, line_ = 0;
  LineState line_state_ = kLineStart;
  std::string name_;                // the header line's name so far, lower case (its first 32 bytes)
  bool value_blank_ = true;         // nothing but whitespace in the header line's value so far
  std::array<char, 8> version_{};   // the request line's last 8 bytes
  bool http10_ = false;             // the request line ends in "HTTP/1.0"
};

}  // namespace

void close_lingering(int fd, int max_ms, std::size_t max_bytes) {
  ::shutdown(fd, SHUT_WR);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  char buf[16384];
  for (std::size_t drained = 0; drained < max_bytes;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
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
  return "header line " + std::to_string(t_fault_line) + " " + t_fault_what;
}

void BoundedHttpServer::close_after_answer() { t_close_after_answer = true; }

void BoundedHttpServer::set_keep_alive(bool keep) { t_connection = keep ? ConnectionChoice::kKeep : ConnectionChoice::kClose; }

int BoundedHttpServer::current_socket() { return t_socket; }

// cpp-httplib 0.11's loop (detail::process_server_socket): at most keep_alive_max_count_ requests,
// each awaited for keep_alive_timeout_sec_, the last one answered with "Connection: close". Ours
// also skips empty lines before a request, ends after an answer marked by close_after_answer() or
// to a head cut short, keeps or ends the connection as set_keep_alive() says when it was called,
// ends it the lingering way whenever the client's bytes are still coming, and looks at the
// server's stop every 100 ms while it waits.
bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  HeadBoundedStream strm(sock, to_ms(read_timeout_sec_, read_timeout_usec_), to_ms(write_timeout_sec_, write_timeout_usec_),
                         max_head_bytes_, head_timeout_);
  t_socket = sock;
  bool ok = false;
  for (std::size_t left = keep_alive_max_count_; left > 0; --left) {
    // the next request's first byte, within the keep-alive timeout (empty lines do not extend it)
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    int arrived = 0;
    while (arrived == 0 && svr_sock_ != INVALID_SOCKET && std::chrono::steady_clock::now() <= deadline)
      if (strm.wait_readable(100)) arrived = strm.skip_empty_lines();
    if (arrived != 1 || svr_sock_ == INVALID_SOCKET) break;
    strm.start_request();
    bool connection_closed = false;
    ok = process_request(strm, left == 1, connection_closed, nullptr);
    const bool refused = t_close_after_answer || t_head_fault != HeadFault::kNone;
    const bool close = t_connection == ConnectionChoice::kClose || (t_connection == ConnectionChoice::kDefault && connection_closed);
    if (refused || close || !ok || left == 1) {
      // Bytes still coming (a refused body, the head's rest, requests past the keep-alive count)
      // are read and dropped, so that they are never a request and the answers sent are not lost
      // to the reset that closing with unread bytes sends.
      if (refused || strm.input_pending()) close_lingering(sock, 2000, std::size_t{1} << 30);
      break;
    }
  }
  t_head_fault = HeadFault::kNone;
  t_close_after_answer = false;
  t_connection = ConnectionChoice::kDefault;
  t_socket = -1;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace mamba::server
