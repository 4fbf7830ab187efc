#include "server/listen_address.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace mamba::server {

void listen_socket_options(int sock) {
  int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  // Accepted connections inherit it (Linux): cpp-httplib writes an answer's headers and body in
  // separate sends, and Nagle's algorithm held the body back until the client's delayed ACK
  // (~40 ms per request on a reused keep-alive connection).
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
}

std::optional<std::string> listen_address_unavailable(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;  // as cpp-httplib resolves the listen address
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    return fmt::format("cannot resolve the address: {}", rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc));
  }
  std::optional<std::string> reason = "no address to bind";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int sock = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (sock < 0) {
      reason = fmt::format("socket: {}", std::strerror(errno));
      continue;
    }
    listen_socket_options(sock);
    const bool ok = bind(sock, a->ai_addr, a->ai_addrlen) == 0 && listen(sock, 1) == 0;
    if (!ok) reason = std::strerror(errno);
    close(sock);
    if (ok) {
      reason.reset();
      break;
    }
  }
  freeaddrinfo(res);
  return reason;
}

std::string bind_failure_reason(const std::string& host, int port) {
  return listen_address_unavailable(host, port).value_or("reason unknown (a second attempt succeeded)");
}

std::string listen_url(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && !host.starts_with('[');
  return (v6 ? "http://[" + host + "]:" : "http://" + host + ":") + std::to_string(port);
}

}  // namespace mamba::server
