#include "server/client_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace mamba::server {

namespace {

// "ip", port of a socket address, formatted as cpp-httplib formats Request::remote_addr.
bool endpoint(const sockaddr_storage& sa, socklen_t len, std::string& ip, int& port) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (sa.ss_family != AF_INET && sa.ss_family != AF_INET6) return false;
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&sa), len, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  ip = host;
  port = std::atoi(serv);
  return true;
}

bool matches(int fd, const httplib::Request& req) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage sa{};
  socklen_t len = sizeof sa;
  std::string ip;
  int port = -1;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0 || !endpoint(sa, len, ip, port)) return false;
  if (port != req.remote_port || ip != req.remote_addr) return false;
  len = sizeof sa;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0 || !endpoint(sa, len, ip, port)) return false;
  return port == req.local_port && ip == req.local_addr;
}

}  // namespace

ClientConnection::ClientConnection(const httplib::Request& req) {
  if (req.remote_port <= 0 || req.local_port <= 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  const int own = dirfd(dir);
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    if (fd == own) continue;
    if (matches(fd, req)) {
      fd_ = fd;
      break;
    }
  }
  closedir(dir);
}

bool ClientConnection::closed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void ClientConnection::close_after_answer(int max_ms, std::size_t max_bytes) const {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_WR);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  char buf[16384];
  for (std::size_t drained = 0; drained < max_bytes;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()).count();
    pollfd p{fd_, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) break;  // the client closed (or an error)
    drained += static_cast<std::size_t>(n);
  }
  ::shutdown(fd_, SHUT_RD);
}

}  // namespace mamba::server
