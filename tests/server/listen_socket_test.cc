// The listening socket's options reach the connections it accepts: TCP_NODELAY (without it, an
// answer's body waited ~40 ms for the client's delayed ACK on every reused keep-alive connection,
// as cpp-httplib writes headers and body in separate sends) and SO_REUSEADDR on the listener.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "server/listen_address.h"
#include "server/loopback.h"

namespace mamba::server {
namespace {

int int_option(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  EXPECT_EQ(getsockopt(fd, level, name, &v, &len), 0);
  return v;
}

TEST(ListenSocket, AcceptedConnectionsHaveNagleOff) {
  Loopback lo(&listen_socket_options);
  ASSERT_GE(lo.server, 0);
  EXPECT_NE(int_option(lo.listener, SOL_SOCKET, SO_REUSEADDR), 0);
  EXPECT_NE(int_option(lo.server, IPPROTO_TCP, TCP_NODELAY), 0) << "Nagle stays on for the accepted connection";
  EXPECT_EQ(int_option(lo.client, IPPROTO_TCP, TCP_NODELAY), 0);  // the check can tell the difference
}

TEST(ListenSocket, ListenUrlBracketsAnIpv6Literal) {
  EXPECT_EQ(listen_url("127.0.0.1", 8080), "http://127.0.0.1:8080");
  EXPECT_EQ(listen_url("localhost", 80), "http://localhost:80");
  EXPECT_EQ(listen_url("::1", 8080), "http://[::1]:8080");
  EXPECT_EQ(listen_url("[::]", 9), "http://[::]:9");  // already in brackets: kept
}

}  // namespace
}  // namespace mamba::server
