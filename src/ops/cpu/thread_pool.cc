// The compute thread pool (thread_pool.h).
//
// A region's nt shares (body(t, nt), t < nt) are claimed, one at a time, from one atomic word that
// holds the region's generation, nt and the next unclaimed share: the caller publishes the region
// (body_, then the word), bumps `go` of workers 1 .. nt−1 (each worker's own cache line, `Slot`; the
// others never wake), and then claims shares itself like any worker, starting with share 0. A share
// runs exactly once, on whichever thread claimed it (the bodies' results depend on t, never on the
// thread: bitwise the same either way). So when a worker is late — asleep, or its core taken by
// another process — the caller runs that worker's share instead of waiting for it: on a machine
// whose cores are busy a decode step degrades to one thread's speed rather than stalling on every
// one of its ~145 regions (2 threads beside one busy process: ~10 tok/s against ~250 idle, before).
// The caller then waits until `done_` counts nt finished shares, so the body and its captures
// outlive every use; a worker that wakes after the last share was claimed finds none and goes back
// to waiting without touching the body. Waiting, on either side, is a spin of up to
// kSpinMicroseconds and then a futex wait, after the waiter marks itself sleeping; the other side
// issues a futex wake only when it sees the mark (a wake is a system call). Mark and check are
// sequentially consistent, so no wake-up is lost: either the waker sees the mark, or the futex wait
// sees the new value and does not block. With OMP_WAIT_POLICY=passive nobody spins. When the OS
// refuses a thread, the caller runs that share itself. Regions of more threads than CPUs (nt > the
// CPUs this process may run on) are OpenMP regions instead (parallel_region).
#include "ops/cpu/thread_pool.h"

#include "mamba/thread_limit.h"

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
#include <utility>
#include <vector>

#include <immintrin.h>

namespace mamba::ops::cpu {

namespace {

constexpr std::int64_t kSpinMicroseconds = 500;  ///< a worker's (and the caller's) spin before it sleeps

thread_local bool t_in_region = false;  ///< this thread runs a region body (nested calls go serial)

int available_cpus() {
  static const int n = usable_cpus();  // read once: the pool is sized from it
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

/// The first exception of one region: each share runs through run(), which keeps what it throws if
/// nothing was kept yet, so that the region's caller can rethrow it once every share has finished
/// (an exception leaving a worker thread, or an OpenMP region, would terminate the process).
struct FirstError {
  std::mutex mu;
  std::exception_ptr error;  ///< under mu

  void run(const RegionBody& body, int t, int nt) {
    try {
      body(t, nt);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  }
  /// Rethrows the kept exception, if any, leaving none kept (for the next region).
  void rethrow() {
    if (std::exception_ptr e = std::exchange(error, nullptr)) std::rethrow_exception(e);
  }
};

class Pool {
 public:
  static Pool& get() {
    static Pool* pool = new Pool;  // never destroyed: workers may still be blocked at exit
    return *pool;
  }

  void run(int nt, RegionBody body) {
    const std::lock_guard<std::mutex> lock(run_mu_);
    const int workers = grow(nt - 1);  // fewer when the OS refuses threads: the caller claims the rest
    body_ = &body;
    done_.store(0, std::memory_order_relaxed);
    generation_ = (generation_ + 1) & 0xFFFFFFFFu;
    // Publishes body_ and done_ to whoever claims a share of this region (acquire in claim()).
    claim_.store(generation_ << 32 | static_cast<std::uint64_t>(nt) << 16, std::memory_order_seq_cst);
    for (int w = 1; w <= workers; ++w) {
      Slot& s = *slots_[static_cast<std::size_t>(w - 1)];
      s.go.fetch_add(1, std::memory_order_seq_cst);
      if (s.sleeping.load(std::memory_order_seq_cst)) futex_wake_one(s.go);
    }
    t_in_region = true;
    for (int t, k; (t = claim(k)) >= 0;) {
      first_error_.run(body, t, nt);
      done_.fetch_add(1, std::memory_order_acq_rel);
    }
    t_in_region = false;
    wait_for_shares(static_cast<std::uint32_t>(nt), !passive_wait());  // nt ≤ the CPUs here (parallel_region)
    // Every share has finished: what one of them threw goes to the caller (and not to the next region).
    first_error_.rethrow();
  }

  /// Returns once all nt shares of the region have finished: spinning for up to kSpinMicroseconds
  /// when `spin`, then blocked in a futex wait on done_ (the worker that finishes the last share wakes
  /// a sleeping caller), so a caller never holds a CPU that a worker of its region is waiting for.
  void wait_for_shares(std::uint32_t nt, bool spin) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    for (int i = 1; done_.load(std::memory_order_acquire) != nt; ++i) {
      _mm_pause();
      if (i % 256 == 0 && (!spin || Clock::now() - t0 > std::chrono::microseconds(kSpinMicroseconds))) break;
    }
    for (std::uint32_t d; (d = done_.load(std::memory_order_seq_cst)) != nt;) {
      caller_sleeping_.store(true, std::memory_order_seq_cst);
      if ((d = done_.load(std::memory_order_seq_cst)) != nt) futex_wait(done_, d);
      caller_sleeping_.store(false, std::memory_order_seq_cst);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
  }

  /// The next unclaimed share of the current region (its nt in `nt`), or −1 when every share has
  /// been claimed (or the region is over). The word: generation (32 bits) | nt (16: regions here
  /// have at most as many threads as CPUs) | next share (16).
  int claim(int& nt) {
    std::uint64_t c = claim_.load(std::memory_order_acquire);
    for (;;) {
      const auto next = static_cast<int>(c & 0xFFFF);
      nt = static_cast<int>((c >> 16) & 0xFFFF);
      if (next >= nt) return -1;
      if (claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_acquire)) return next;
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
    // Likewise the error slot: a region of the parent's may have kept an exception it had not yet
    // rethrown (it is the parent's; leaked here, never rethrown by the child's next region).
    new (&first_error_) FirstError;
    claim_.store(generation_ << 32);  // no share left to claim
  }

 private:
  /// One worker's mailbox: `go` counts the regions it was woken for (32 bits: a futex of its own,
  /// and each new value differs from the one the worker last saw).
  struct alignas(64) Slot {
    std::atomic<std::uint32_t> go{0};
    std::atomic<bool> sleeping{false};
  };

  Pool() { pthread_atfork(nullptr, nullptr, [] { get().forget_workers(); }); }

  /// Starts workers up to n_workers; returns how many there are, at most n_workers.
  int grow(int n_workers) {
    while (static_cast<int>(workers_.size()) < n_workers) {
      try {
        if (slots_.size() == workers_.size()) slots_.push_back(std::make_unique<Slot>());
        Slot* slot = slots_.back().get();
        workers_.emplace_back([this, slot] { work(*slot); });
      } catch (const std::exception&) {  // EAGAIN (the process's thread limit) or out of memory
        break;
      }
    }
    return std::min(n_workers, static_cast<int>(workers_.size()));
  }

  void work(Slot& slot) {
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
      // Shares of the current region while any are left (none: the caller or another worker took
      // them all, and the region may be over; body_ is then not touched).
      t_in_region = true;
      for (int t, nt; (t = claim(nt)) >= 0;) {
        first_error_.run(*body_, t, nt);
        const std::uint32_t finished = done_.fetch_add(1, std::memory_order_seq_cst) + 1;
        if (finished == static_cast<std::uint32_t>(nt) && caller_sleeping_.load(std::memory_order_seq_cst))
          futex_wake_one(done_);
      }
      t_in_region = false;
    }
  }

  std::mutex run_mu_;
  std::vector<std::thread> workers_;
  std::vector<std::unique_ptr<Slot>> slots_;  // slots_[id − 1]: worker id's
  const RegionBody* body_ = nullptr;
  std::uint64_t generation_ = 0;  ///< the current region's number (32 bits), written under run_mu_
  alignas(64) std::atomic<std::uint64_t> claim_{0};  ///< generation | nt | next share (claim())
  alignas(64) std::atomic<std::uint32_t> done_{0};   ///< shares of the current region finished
  std::atomic<bool> caller_sleeping_{false};
  FirstError first_error_;  ///< the current region's first exception
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
    // No exception may leave an OpenMP region: the first one is kept and rethrown after it.
    FirstError first_error;
    t_in_region = true;
#pragma omp parallel num_threads(nt)
    {
      t_in_region = true;
      const int team = omp_get_num_threads();
      for (int t = omp_get_thread_num(); t < nt; t += team) first_error.run(body, t, nt);
    }
    t_in_region = false;
    first_error.rethrow();
    return;
  }
  Pool::get().run(nt, body);
}

}  // namespace mamba::ops::cpu
