// The compute thread pool (thread_pool.h).
//
// Each worker has its own cache line, `Slot`: `go` counts the regions it was given, `nt` the thread
// count of the last. The caller bumps `go` of workers 1 .. nt−1 only (the others never wake), runs
// t = 0, then waits until `remaining_` is 0, so the body and its captures outlive every use.
// Waiting, on either side, is a spin of up to kSpinMicroseconds and then a futex wait, after the
// waiter marks itself sleeping; the other side issues a futex wake only when it sees the mark (a
// wake is a system call). Mark and check are sequentially consistent, so no wake-up is lost: either
// the waker sees the mark, or the futex wait sees the new value and does not block. With
// OMP_WAIT_POLICY=passive nobody spins. When the OS refuses a thread, the caller runs that share
// itself. Regions of more threads than CPUs (nt > the CPUs this process may run on) are OpenMP
// regions instead (parallel_region).
#include "ops/cpu/thread_pool.h"

#include <omp.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <exception>
#include <thread>
#include <vector>

#include <immintrin.h>

namespace mamba::ops::cpu {

namespace {

constexpr std::int64_t kSpinMicroseconds = 500;  ///< a worker's (and the caller's) spin before it sleeps

thread_local bool t_in_region = false;  ///< this thread runs a region body (nested calls go serial)

int available_cpus() {
  static const int n = [] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }();
  return n;
}

/// Blocks while *word == expected (Linux futex). Not std::atomic::wait: libstdc++'s yields the CPU a
/// few times first, which on a busy machine hands whole time slices to other processes (2 threads
/// under one busy process: 6–8 tok/s against libgomp's 54–92).
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_one(std::atomic<std::uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
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
    remaining_.store(static_cast<std::uint32_t>(workers), std::memory_order_relaxed);
    for (int w = 1; w <= workers; ++w) {
      Slot& s = *slots_[static_cast<std::size_t>(w - 1)];
      s.nt = nt;
      s.go.fetch_add(1, std::memory_order_seq_cst);
      if (s.sleeping.load(std::memory_order_seq_cst)) futex_wake_one(s.go);
    }
    t_in_region = true;
    body(0, nt);
    for (int t = workers + 1; t < nt; ++t) body(t, nt);
    t_in_region = false;
    wait_for_workers(!passive_wait());  // nt ≤ the CPUs here (parallel_region)
  }

  /// Returns once every worker of the region has finished: spinning for up to kSpinMicroseconds when
  /// `spin`, then blocked in a futex wait on remaining_ (the last worker wakes a sleeping caller), so
  /// a caller never holds a CPU that a worker of its region is waiting for.
  void wait_for_workers(bool spin) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    for (int i = 1; remaining_.load(std::memory_order_acquire) != 0; ++i) {
      _mm_pause();
      if (i % 256 == 0 && (!spin || Clock::now() - t0 > std::chrono::microseconds(kSpinMicroseconds))) break;
    }
    for (std::uint32_t r; (r = remaining_.load(std::memory_order_seq_cst)) != 0;) {
      caller_sleeping_.store(true, std::memory_order_seq_cst);
      if ((r = remaining_.load(std::memory_order_seq_cst)) != 0) futex_wait(remaining_, r);
      caller_sleeping_.store(false, std::memory_order_seq_cst);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
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
  /// One worker's mailbox: `go` counts the regions given to it (32 bits: a futex of its own, and
  /// each new value differs from the one the worker last saw); `nt` is that region's thread count.
  struct alignas(64) Slot {
    std::atomic<std::uint32_t> go{0};
    std::atomic<bool> sleeping{false};
    int nt = 0;  ///< written before go's increment, read after it
  };

  Pool() { pthread_atfork(nullptr, nullptr, [] { get().forget_workers(); }); }

  /// Starts workers up to n_workers; returns how many there are, at most n_workers.
  int grow(int n_workers) {
    while (static_cast<int>(workers_.size()) < n_workers) {
      const int id = static_cast<int>(workers_.size()) + 1;
      try {
        if (slots_.size() == workers_.size()) slots_.push_back(std::make_unique<Slot>());
        Slot* slot = slots_.back().get();
        workers_.emplace_back([this, id, slot] { work(id, *slot); });
      } catch (const std::exception&) {  // EAGAIN (the process's thread limit) or out of memory
        break;
      }
    }
    return std::min(n_workers, static_cast<int>(workers_.size()));
  }

  void work(int id, Slot& slot) {
    using Clock = std::chrono::steady_clock;
    std::uint32_t seen = 0;  // slots start at 0
    const bool spin = !passive_wait();  // regions here never have more threads than CPUs
    for (;;) {
      std::uint32_t w = slot.go.load(std::memory_order_acquire);
      if (w == seen) {
        const auto t0 = Clock::now();
        for (int i = 1; (w = slot.go.load(std::memory_order_acquire)) == seen; ++i) {
          _mm_pause();
          if (i % 256 == 0 && (!spin || Clock::now() - t0 > std::chrono::microseconds(kSpinMicroseconds))) {
            slot.sleeping.store(true, std::memory_order_seq_cst);
            if (slot.go.load(std::memory_order_seq_cst) == seen) futex_wait(slot.go, seen);
            slot.sleeping.store(false, std::memory_order_seq_cst);
          }
        }
      }
      seen = w;
      const int nt = slot.nt;
      t_in_region = true;
      (*body_)(id, nt);
      t_in_region = false;
      const bool last = remaining_.fetch_sub(1, std::memory_order_seq_cst) == 1;
      if (last && caller_sleeping_.load(std::memory_order_seq_cst)) futex_wake_one(remaining_);
    }
  }

  std::mutex run_mu_;
  std::vector<std::thread> workers_;
  std::vector<std::unique_ptr<Slot>> slots_;  // slots_[id − 1]: worker id's
  const RegionBody* body_ = nullptr;
  alignas(64) std::atomic<std::uint32_t> remaining_{0};
  std::atomic<bool> caller_sleeping_{false};
};

}  // namespace

void parallel_region(int nt, RegionBody body) {
  if (nt <= 1 || t_in_region) {
    body(0, 1);
    return;
  }
  if (nt > available_cpus()) {
    // More threads than CPUs (an explicit --threads above the core count): libgomp's team handles
    // the time-slicing far better than per-region wake-ups of sleeping workers (measured 8 threads
    // on 2 busy CPUs: 29–47 tok/s against 4–5), so such regions stay OpenMP regions.
    t_in_region = true;
#pragma omp parallel num_threads(nt)
    {
      t_in_region = true;
      const int team = omp_get_num_threads();
      for (int t = omp_get_thread_num(); t < nt; t += team) body(t, nt);
    }
    t_in_region = false;
    return;
  }
  Pool::get().run(nt, body);
}

}  // namespace mamba::ops::cpu
