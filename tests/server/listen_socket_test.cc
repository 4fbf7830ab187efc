// The listening socket's options reach the connections it accepts: TCP_NODELAY (without it, an
// answer's body waited ~40 ms for the client's delayed ACK on every reused keep-alive connection,
// as cpp-httplib writes headers and body in separate sends) and SO_REUSEADDR on the listener.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/listen_address.h"

namespace mamba::server {
namespace {

int int_option(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  EXPECT_EQ(getsockopt(fd, level, name, &v, &len), 0);
  return v;
}

TEST(ListenSocket, AcceptedConnectionsHaveNagleOff) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  listen_socket_options(listener);
  EXPECT_NE(int_option(listener, SOL_SOCKET, SO_REUSEADDR), 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  const int accepted = accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  EXPECT_NE(int_option(accepted, IPPROTO_TCP, TCP_NODELAY), 0) << "Nagle stays on for the accepted connection";
  EXPECT_EQ(int_option(client, IPPROTO_TCP, TCP_NODELAY), 0);  // the check can tell the difference
  close(accepted);
  close(client);
  close(listener);
}

}  // namespace
}  // namespace mamba::server
