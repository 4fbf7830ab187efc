// ConnectionParking (connection_parking.h): one epoll thread over the parked sockets.
#include "server/connection_parking.h"

#include <fmt/format.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>
#include <vector>

namespace mamba::server {

namespace {
/// How often the deadlines are looked at (and the longest a silent client outstays its deadline).
constexpr int kTickMs = 50;
}  // namespace

Result<std::unique_ptr<ConnectionParking>> ConnectionParking::create(Resume resume, std::size_t max_parked) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return make_error(ErrorCode::kIo, fmt::format("cannot create the HTTP connection watch (epoll_create1: {})", std::strerror(errno)));
  std::unique_ptr<ConnectionParking> p(new ConnectionParking(ep, std::move(resume), max_parked < 1 ? 1 : max_parked));
  if (p->wake_fd_ < 0) return make_error(ErrorCode::kIo, fmt::format("cannot create the HTTP connection watch (eventfd: {})", std::strerror(errno)));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = p->wake_fd_;
  if (epoll_ctl(ep, EPOLL_CTL_ADD, p->wake_fd_, &ev) != 0)
    return make_error(ErrorCode::kIo, fmt::format("cannot create the HTTP connection watch (epoll_ctl: {})", std::strerror(errno)));
  try {
    p->thread_ = std::thread([q = p.get()] { q->run(); });
  } catch (const std::system_error& e) {
    return make_error(ErrorCode::kIo, fmt::format("cannot start the HTTP connection watch thread ({})", e.code().message()));
  }
  return p;
}

ConnectionParking::ConnectionParking(int epoll_fd, Resume resume, std::size_t max_parked)
    : epoll_fd_(epoll_fd), wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), resume_(std::move(resume)), max_parked_(max_parked) {}

ConnectionParking::~ConnectionParking() {
  close_all();
  {
    const std::lock_guard lk(mu_);
    stopping_ = true;
  }
  if (wake_fd_ >= 0) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  }
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  ::close(epoll_fd_);
}

void ConnectionParking::park(std::unique_ptr<ParkedConnection> c) {
  std::unique_ptr<ParkedConnection> refused;  // closed outside the lock
  {
    const std::lock_guard lk(mu_);
    const int fd = c->fd();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (closed_ || parked_.size() >= max_parked_ || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      refused = std::move(c);
    } else {
      parked_.emplace(fd, std::move(c));
    }
  }
}

void ConnectionParking::close_all() {
  std::unordered_map<int, std::unique_ptr<ParkedConnection>> gone;  // closed outside the lock
  {
    const std::lock_guard lk(mu_);
    closed_ = true;
    for (auto& [fd, c] : parked_) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    gone.swap(parked_);
    paused_.clear();
  }
}

std::size_t ConnectionParking::parked() const {
  const std::lock_guard lk(mu_);
  return parked_.size();
}

void ConnectionParking::watch_input(int fd, bool on) {
  epoll_event ev{};
  ev.events = on ? EPOLLIN | EPOLLRDHUP : EPOLLRDHUP;  // (errors and hang-ups are reported either way)
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
  if (on) paused_.erase(fd);
  else paused_.insert(fd);
}

std::unique_ptr<ParkedConnection> ConnectionParking::take(int fd) {
  const auto it = parked_.find(fd);
  if (it == parked_.end()) return nullptr;
  std::unique_ptr<ParkedConnection> c = std::move(it->second);
  parked_.erase(it);
  paused_.erase(fd);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  return c;
}

void ConnectionParking::finish(std::unique_ptr<ParkedConnection> c, ParkedConnection::Next next) {
  if (next == ParkedConnection::Next::kResume && !closed_) resume_(std::move(c));
  // otherwise `c` is destroyed here: its socket closes
}

void ConnectionParking::close_deadlines(std::chrono::steady_clock::time_point now) {
  std::vector<int> due;
  for (const auto& [fd, c] : parked_)
    if (c->deadline() <= now) due.push_back(fd);
  for (const int fd : due) {
    std::unique_ptr<ParkedConnection> c = take(fd);
    const ParkedConnection::Next next = c->at_deadline();
    finish(std::move(c), next);
  }
}

void ConnectionParking::run() {
  std::array<epoll_event, 256> events{};
  auto last_scan = std::chrono::steady_clock::now();
  for (;;) {
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), kTickMs);
    const std::lock_guard lk(mu_);
    if (stopping_) return;
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<std::size_t>(i)].data.fd;
      if (fd == wake_fd_) continue;
      const auto it = parked_.find(fd);
      if (it == parked_.end()) continue;  // closed by close_all() since epoll_wait returned
      const ParkedConnection::Next next = it->second->on_readable();
      if (next != ParkedConnection::Next::kWait) finish(take(fd), next);
      else if (paused_.count(fd) == 0 && !it->second->wants_input()) watch_input(fd, false);
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - last_scan >= std::chrono::milliseconds(kTickMs)) {
      std::vector<int> again;
      for (const int fd : paused_)
        if (parked_.at(fd)->wants_input()) again.push_back(fd);
      for (const int fd : again) watch_input(fd, true);
      close_deadlines(now);
      last_scan = now;
    }
  }
}

}  // namespace mamba::server
