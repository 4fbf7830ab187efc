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

 private:
  int fd_ = -1;
};

}  // namespace mamba::server
