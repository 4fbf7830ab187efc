// The compute thread pool (thread_pool.h).
//
// Each worker has its own cache line, `Slot::go`, holding the last region it was given as
// (sequence number << 16) | nt. The caller stores the new word into the slots of workers 1 .. nt−1
// only (the others never wake), runs t = 0, then spins until `remaining_` is 0, so the body and its
// captures outlive every use. A worker spins on its slot for kSpinMicroseconds after a region, then
// marks itself sleeping and blocks in go.wait(); the caller notifies only a sleeping worker (a
// notify is a system call). The mark and the caller's check are sequentially consistent, so a
// wake-up is never lost: either the caller sees the mark, or the worker's wait() sees the new word
// and does not block. With more threads than CPUs (nt > the CPUs this process may run on), or with
// OMP_WAIT_POLICY=passive, nobody spins: a worker sleeps at once and the caller yields while it
// waits (as libgomp throttles). When the OS refuses a thread, the caller runs that share itself.
#include "ops/cpu/thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include <immintrin.h>

namespace mamba::ops::cpu {

namespace {

constexpr std::int64_t kSpinMicroseconds = 2000;  ///< a worker's spin before it sleeps
constexpr std::uint64_t kNtMask = 0xffff;

thread_local bool t_in_region = false;  ///< this thread runs a region body (nested calls go serial)

int available_cpus() {
  static const int n = [] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }();
  return n;
}

/// OMP_WAIT_POLICY=passive (as for OpenMP runtimes): no spinning at all, e.g. for many processes
/// on few cores.
bool passive_wait() {
  static const bool passive = [] {
    const char* v = std::getenv("OMP_WAIT_POLICY");
    return v != nullptr && strcasecmp(v, "passive") == 0;
  }();
  return passive;
}

class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool;  // never destroyed: workers may still be blocked at exit
    return *pool;
  }

  void run(int nt, RegionBody body) {
    const std::lock_guard<std::mutex> lock(run_mu_);
    const int workers = grow(nt - 1);  // fewer when the OS refuses threads: the caller runs the rest
    body_ = &body;
    remaining_.store(workers, std::memory_order_relaxed);
    const std::uint64_t word = (++seq_ << 16) | static_cast<std::uint64_t>(nt);
    for (int w = 1; w <= workers; ++w) {
      Slot& s = *slots_[static_cast<std::size_t>(w - 1)];
      s.go.store(word, std::memory_order_seq_cst);
      if (s.sleeping.load(std::memory_order_seq_cst)) s.go.notify_one();
    }
    t_in_region = true;
    body(0, nt);
    for (int t = workers + 1; t < nt; ++t) body(t, nt);
    t_in_region = false;
    const bool spin = nt <= available_cpus() && !passive_wait();
    for (int i = 0; remaining_.load(std::memory_order_acquire) != 0; ++i) {
      if (spin || i < 64)
        _mm_pause();
      else
        std::this_thread::yield();  // a worker may be waiting for the CPU this thread holds
    }
  }

  /// After fork(): the child has none of the parent's workers.
  void forget_workers() {
    // The std::thread objects name threads of the parent: never joined nor destroyed here (a
    // joinable std::thread's destructor terminates); they and their slots are leaked.
    (void)new std::vector<std::thread>(std::move(workers_));
    (void)new std::vector<std::unique_ptr<Slot>>(std::move(slots_));
    workers_.clear();
    slots_.clear();
    new (&run_mu_) std::mutex;  // in case the fork happened while another thread held it
    remaining_.store(0);
  }

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> go{0};
    std::atomic<bool> sleeping{false};
  };

  Pool() { pthread_atfork(nullptr, nullptr, [] { get().forget_workers(); }); }

  /// Starts workers up to n_workers; returns how many there are, at most n_workers.
  int grow(int n_workers) {
    while (static_cast<int>(workers_.size()) < n_workers) {
      if (slots_.size() == workers_.size()) slots_.push_back(std::make_unique<Slot>());
      Slot* slot = slots_.back().get();
      const int id = static_cast<int>(workers_.size()) + 1;
      try {
        workers_.emplace_back([this, id, slot] { work(id, *slot); });
      } catch (const std::system_error&) {  // EAGAIN: the process's thread limit
        break;
      }
    }
    return std::min(n_workers, static_cast<int>(workers_.size()));
  }

  void work(int id, Slot& slot) {
    using Clock = std::chrono::steady_clock;
    std::uint64_t seen = 0;  // slots start at 0; the first region's word is ≥ 1 << 16
    bool spin = true;
    for (;;) {
      std::uint64_t w = slot.go.load(std::memory_order_acquire);
      if (w == seen) {
        const auto t0 = Clock::now();
        for (int i = 1; (w = slot.go.load(std::memory_order_acquire)) == seen; ++i) {
          _mm_pause();
          if (i % 256 == 0 && (!spin || Clock::now() - t0 > std::chrono::microseconds(kSpinMicroseconds))) {
            slot.sleeping.store(true, std::memory_order_seq_cst);
            slot.go.wait(seen, std::memory_order_seq_cst);
            slot.sleeping.store(false, std::memory_order_seq_cst);
          }
        }
      }
      seen = w;
      const int nt = static_cast<int>(w & kNtMask);
      spin = nt <= available_cpus() && !passive_wait();
      t_in_region = true;
      (*body_)(id, nt);
      t_in_region = false;
      remaining_.fetch_sub(1, std::memory_order_release);
    }
  }

  std::mutex run_mu_;
  std::vector<std::thread> workers_;
  std::vector<std::unique_ptr<Slot>> slots_;  // slots_[id − 1]: worker id's
  std::uint64_t seq_ = 0;
  const RegionBody* body_ = nullptr;
  alignas(64) std::atomic<int> remaining_{0};
};

}  // namespace

void parallel_region(int nt, RegionBody body) {
  if (nt <= 1 || t_in_region) {
    body(0, 1);
    return;
  }
  Pool::get().run(nt, body);
}

}  // namespace mamba::ops::cpu
