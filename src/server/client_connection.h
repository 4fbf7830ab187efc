// ClientConnection: notices a client that closed its connection while a blocking (non-stream)
// handler waits for its generation, so the sequence can be cancelled as a vanished stream is.
// cpp-httplib 0.11 (Debian 12) gives handlers neither the socket nor is_connection_closed(), so
// the socket is found among the process's descriptors by the request's addresses (local and
// remote address and port: unique among open TCP connections). The handler's own thread keeps
// that socket open until the handler returns, so the descriptor cannot be reused meanwhile.
#pragma once

#include <httplib.h>

namespace mamba::server {

class ClientConnection {
 public:
  /// Looks up the socket `req` arrived on (one scan of /proc/self/fd). When none matches (not
  /// TCP, no /proc), found() is false and closed() always answers false.
  explicit ClientConnection(const httplib::Request& req);

  /// Whether the request's socket was found.
  bool found() const { return fd_ >= 0; }

  /// True once the peer has closed or reset the connection (FIN or RST received; non-blocking).
  /// A client that half-closes (shutdown(SHUT_WR)) right after its request counts as gone, as
  /// with later cpp-httplib's Request::is_connection_closed().
  bool closed() const;

  /// Closes the connection after an answer already written to it, the lingering way (RFC 7230
  /// §6.6): shutdown(SHUT_WR) so the client sees the answer end, then read and discard what it
  /// still sends (a refused body) until it closes, for at most `max_ms` / `max_bytes`, then
  /// shutdown(SHUT_RD), so that cpp-httplib's keep-alive loop sees the end of the connection
  /// instead of reading the rest of the body as further requests. No-op when !found().
  void close_after_answer(int max_ms, std::size_t max_bytes) const;

 private:
  int fd_ = -1;
};

}  // namespace mamba::server
