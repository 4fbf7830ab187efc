// A loopback TCP connection for the server tests that need a real socket (ClientConnection,
// the listening socket's options).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace mamba::server {

inline std::string ip_of(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN];
  return inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf);
}

/// A loopback TCP connection: `server` is the accepted end, `client` the connecting one.
/// `listener_options` (optional) runs on the listening socket before it binds, as cpp-httplib's
/// socket-options hook does.
struct Loopback {
  int listener = -1, client = -1, server = -1;
  httplib::Request req;  // the addresses cpp-httplib would fill in for `server`
  explicit Loopback(void (*listener_options)(int) = nullptr) {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener_options != nullptr) listener_options(listener);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    socklen_t len = sizeof a;
    getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
    client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    server = accept(listener, nullptr, nullptr);
    EXPECT_GE(server, 0);
    sockaddr_in peer{}, local{};
    len = sizeof peer;
    getpeername(server, reinterpret_cast<sockaddr*>(&peer), &len);
    len = sizeof local;
    getsockname(server, reinterpret_cast<sockaddr*>(&local), &len);
    req.remote_addr = ip_of(peer);
    req.remote_port = ntohs(peer.sin_port);
    req.local_addr = ip_of(local);
    req.local_port = ntohs(local.sin_port);
  }
  ~Loopback() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
};

}  // namespace mamba::server
