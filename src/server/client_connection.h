// ClientConnection: notices a client that closed its connection while a blocking (non-stream)
// handler waits for its generation, so the sequence can be cancelled as a vanished stream is.
// cpp-httplib 0.11 (Debian 12) gives handlers neither the socket nor is_connection_closed(); our
// connection loop does (BoundedHttpServer::current_socket()). The handler's own thread keeps that
// socket open until the handler returns, so the descriptor cannot be reused meanwhile.
#pragma once

namespace mamba::server {

class ClientConnection {
 public:
  /// `fd`: the socket the request arrived on (BoundedHttpServer::current_socket() in a handler),
  /// not owned. fd < 0 (none): found() is false and closed() always answers false.
  explicit ClientConnection(int fd) : fd_(fd < 0 ? -1 : fd) {}

  /// Whether there is a socket to watch.
  bool found() const { return fd_ >= 0; }

  /// True once the peer has closed or reset the connection (FIN or RST received; non-blocking).
  /// A client that half-closes (shutdown(SHUT_WR)) right after its request counts as gone, as
  /// with later cpp-httplib's Request::is_connection_closed().
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace mamba::server
