// A loopback TCP connection for the server tests that need a real socket (ClientConnection,
// the listening socket's options).
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace mamba::server {

/// A loopback TCP connection: `server` is the accepted end, `client` the connecting one.
/// `listener_options` (optional) runs on the listening socket before it binds, as cpp-httplib's
/// socket-options hook does.
struct Loopback {
  int listener = -1, client = -1, server = -1;
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
  }
  ~Loopback() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
};

}  // namespace mamba::server
