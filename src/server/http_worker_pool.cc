// HttpWorkerPool (http_worker_pool.h).
#include "server/http_worker_pool.h"

#include <fmt/format.h>

#include <system_error>
#include <utility>

namespace mamba::server {

Result<std::unique_ptr<HttpWorkerPool>> HttpWorkerPool::create(std::size_t n) {
  std::unique_ptr<HttpWorkerPool> pool(new HttpWorkerPool);
  pool->threads_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    try {
      pool->threads_.emplace_back([p = pool.get()] { p->work(); });
    } catch (const std::system_error& e) {
      const std::size_t started = pool->threads_.size();
      pool->shutdown();
      return make_error(ErrorCode::kIo, fmt::format("cannot start {} HTTP threads (the OS refused thread {}: {}); "
                                                    "lower --http-threads / --max-concurrent-requests or raise the "
                                                    "process's thread or memory limit (ulimit -u / -v)",
                                                    n, started + 1, e.code().message()));
    }
  }
  return pool;
}

HttpWorkerPool::~HttpWorkerPool() { shutdown(); }

void HttpWorkerPool::enqueue(std::function<void()> fn) {
  {
    const std::lock_guard lk(mu_);
    jobs_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void HttpWorkerPool::shutdown() {
  if (before_shutdown_) std::exchange(before_shutdown_, nullptr)();
  {
    const std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

std::size_t HttpWorkerPool::idle() const {
  const std::lock_guard lk(mu_);
  const std::size_t taken = running_ + jobs_.size();
  return threads_.size() > taken ? threads_.size() - taken : 0;
}

void HttpWorkerPool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping, and every queued job has run
      job = std::move(jobs_.front());
      jobs_.pop_front();
      ++running_;
    }
    job();
    job = nullptr;  // (what it holds is released before the thread counts as idle)
    const std::lock_guard lk(mu_);
    --running_;
  }
}

}  // namespace mamba::server
