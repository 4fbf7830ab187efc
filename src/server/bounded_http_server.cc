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

thread_local HeadLimit t_head_limit = HeadLimit::kNone;
thread_local bool t_close_after_answer = false;
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
/// its own SocketStream), kept across the connection's requests, with the head's bytes bounded:
/// from start_request() until the blank line that ends the head, a line reads as ended after
/// kMaxHeadLine + 1 bytes and the head after max_head bytes (read() returns 0, which cpp-httplib's
/// line reader takes as the end of the line, then of the input).
class HeadBoundedStream final : public httplib::Stream {
 public:
  HeadBoundedStream(int fd, long read_timeout_ms, long write_timeout_ms, std::size_t max_head)
      : fd_(fd), read_timeout_ms_(read_timeout_ms), write_timeout_ms_(write_timeout_ms), max_head_(max_head) {}

  /// A new request's head begins with the next byte read.
  void start_request() {
    in_head_ = true;
    head_bytes_ = line_bytes_ = 0;
    after_newline_ = 1;  // as after a line's end: a request that begins with "\r\n" has an empty request line
    t_head_limit = HeadLimit::kNone;
    t_close_after_answer = false;
  }

  /// Whether the next request's first bytes are here within `ms` (already buffered, or on the socket).
  bool wait_readable(long ms) const { return off_ < len_ || wait_for(fd_, POLLIN, ms); }

  bool is_readable() const override { return wait_readable(read_timeout_ms_); }
  bool is_writable() const override { return wait_for(fd_, POLLOUT, write_timeout_ms_); }

  ssize_t read(char* ptr, std::size_t size) override {
    if (size == 0) return 0;
    if (in_head_) {
      if (t_head_limit != HeadLimit::kNone) return 0;
      size = 1;  // the head is read a byte at a time (cpp-httplib's line reader asks for one): count each
    }
    if (off_ == len_) {
      if (!is_readable()) return -1;
      if (size >= buf_.size()) return receive(ptr, size);  // a large body read: straight into the caller's buffer
      const ssize_t n = receive(buf_.data(), buf_.size());
      if (n <= 0) return n;
      off_ = 0;
      len_ = static_cast<std::size_t>(n);
    }
    const std::size_t n = std::min(size, len_ - off_);
    if (in_head_ && !count_head_byte(buf_[off_])) return 0;
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

  /// Counts one byte of the head, about to be handed out; false (and t_head_limit set) when it is
  /// past a bound. The head ends at a line that is "\r\n" alone (cpp-httplib 0.11 ends it there
  /// only: a bare "\n" line is skipped as an invalid header line).
  bool count_head_byte(char c) {
    if (++head_bytes_ > max_head_) {
      t_head_limit = HeadLimit::kHead;
      return false;
    }
    if (++line_bytes_ > BoundedHttpServer::kMaxHeadLine + 1) {
      t_head_limit = HeadLimit::kLine;
      return false;
    }
    if (c == '\n') {
      if (after_newline_ == 2) in_head_ = false;  // "\r\n" right after a line's end: the blank line
      after_newline_ = 1;
      line_bytes_ = 0;
    } else {
      after_newline_ = (after_newline_ == 1 && c == '\r') ? 2 : 0;
    }
    return true;
  }

  int fd_;
  long read_timeout_ms_;
  long write_timeout_ms_;
  std::size_t max_head_;
  std::array<char, 4096> buf_{};  // cpp-httplib's SocketStream reads ahead 4 KiB too
  std::size_t off_ = 0, len_ = 0;
  bool in_head_ = false;
  std::size_t head_bytes_ = 0, line_bytes_ = 0;
  int after_newline_ = 0;  // 1: the last byte ended a line; 2: ... and "\r" followed it
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

BoundedHttpServer::BoundedHttpServer(std::size_t max_head_bytes) : max_head_bytes_(std::max(max_head_bytes, kMaxHeadLine + 1)) {}

HeadLimit BoundedHttpServer::head_limit() { return t_head_limit; }

void BoundedHttpServer::close_after_answer() { t_close_after_answer = true; }

int BoundedHttpServer::current_socket() { return t_socket; }

// cpp-httplib 0.11's loop (detail::process_server_socket): at most keep_alive_max_count_ requests,
// each awaited for keep_alive_timeout_sec_, the last one answered with "Connection: close". Ours
// also ends after an answer marked by close_after_answer() or to a head past its bounds, and looks
// at the server's stop every 100 ms while it waits.
bool BoundedHttpServer::process_and_close_socket(socket_t sock) {
  HeadBoundedStream strm(sock, to_ms(read_timeout_sec_, read_timeout_usec_), to_ms(write_timeout_sec_, write_timeout_usec_),
                         max_head_bytes_);
  t_socket = sock;
  bool ok = false;
  for (std::size_t left = keep_alive_max_count_; left > 0; --left) {
    bool arrived = false;
    for (long waited = 0; svr_sock_ != INVALID_SOCKET && waited <= keep_alive_timeout_sec_ * 1000; waited += 100) {
      if ((arrived = strm.wait_readable(100))) break;
    }
    if (!arrived || svr_sock_ == INVALID_SOCKET) break;
    strm.start_request();
    bool connection_closed = false;
    ok = process_request(strm, left == 1, connection_closed, nullptr);
    if (t_close_after_answer || t_head_limit != HeadLimit::kNone) {
      close_lingering(sock, 2000, std::size_t{1} << 30);  // what the client still sends is never read as a request
      break;
    }
    if (!ok || connection_closed) break;
  }
  t_head_limit = HeadLimit::kNone;
  t_close_after_answer = false;
  t_socket = -1;
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace mamba::server
