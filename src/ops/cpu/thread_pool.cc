// The compute thread pool (thread_pool.h).
//
// Share t of a region (body(t, nt), 0 < t < nt) belongs to worker t, and each worker has three cache
// lines of its own (`Share`), so that starting and ending a region moves as few lines between
// cores as possible (each move is a round trip between cores: ~0.25–0.5 µs on the 2-core Zen 5 guest):
//   - Mailbox: written by the caller only (body, nt, the region's number, then `go`, release
//     stores), read by the worker spinning on `go`: the one line the worker needs to start (plus
//     the pool's `shares_` pointer, on a line of its own that nobody writes).
//   - Claim: which region's share t some thread last took (compare-and-swap). Worker t takes its own
//     share there, normally in a line nobody else touched since (no wait for another core).
//   - Status: started / done (the region's number) and `sleeping`, written by the thread that runs
//     the share (and by the worker), read by the caller.
// The caller publishes the region, runs share 0, then claims every share no thread has claimed (a
// share's `started` word, a hint, spares the claim line of one that visibly has) — a late worker's
// (asleep, or its core taken by another process), or one the OS gave no thread — and
// waits for the done word of each other share. A worker, once its own share is done, takes any
// share of the same region still unclaimed. A share runs exactly once, on whichever thread claimed
// it (the bodies' results depend on t, never on the thread: bitwise the same either way). So on a
// machine whose cores are busy a decode step degrades to one thread's speed rather than stalling
// on every one of its ~100–150 regions (2 threads beside one busy process: ~10 tok/s against ~250
// idle, with an earlier pool that waited for each worker). The body and its captures outlive every
// use: the caller returns only once every share is done, and a worker reads a region's body and nt
// only after it claimed a share of it (which keeps the region open; `go` and the region number it
// reads before, atomically); a worker that finds its share taken goes back to waiting without
// touching the body. `started`, `done` and `go` hold the low 32 bits of region numbers; a share
// unused for 2³² − 1 regions has its words reset first (run()), so an old value never reads as the
// current region's.
// Measured against the previous pool (one shared claim word and one done counter for all threads,
// ~7 line moves per region) on the 2-core Zen 5 guest: an empty region 0.67 → 0.46 µs; within a
// decode scan's region the caller starts its share 0.52 → 0.20 µs and the worker 1.05 → 0.51 µs
// after the region starts.
// Waiting, on either side, is a spin of up to kSpinMicroseconds and then a futex wait, after the
// waiter marks itself sleeping; the other side issues a futex wake only when it sees the mark (a wake
// is a system call). Mark and check are sequentially consistent (the caller: a fence between `go`
// and reading `sleeping`), so no wake-up is lost: either the waker sees the mark, or the futex wait
// sees the new value and does not block. With OMP_WAIT_POLICY=passive each side spins only 256
// pauses (~5 µs) before it sleeps. Regions of
// more threads than CPUs (nt > the CPUs this process may run on) are OpenMP regions instead
// (parallel_region).
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
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
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
  // Read once: the pool is sized from it. MAMBA_TEST_POOL_CPUS (tests only, thread_pool.h).
  static const int n = [] {
    if (const char* v = std::getenv("MAMBA_TEST_POOL_CPUS")) {
      char* end = nullptr;
      const long k = std::strtol(v, &end, 10);
      if (end != v && *end == '\0' && k >= 1 && k <= kMaxThreads) return static_cast<int>(k);
    }
    return usable_cpus();
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
    const int workers = grow(nt - 1);  // fewer when the OS refuses threads: the caller runs the rest
    const std::uint64_t r = ++region_;
    const auto r32 = static_cast<std::uint32_t>(r);
    // started / done hold the low 32 bits of the last region that ran share w (0 before any): after
    // 2^32 regions without share w (or at region 2^32 for one never used) they would equal r32, and
    // the share would count as done without running. Such a share's words get a value r32 is not (no
    // thread writes them now: every share of the earlier regions is done, and a late thread's claim
    // of one fails).
    for (int w = 1; w < nt; ++w) {
      std::uint64_t& last = last_region_[static_cast<std::size_t>(w - 1)];
      if (r - last >= 0xFFFFFFFFull) {
        share(w).status.started.store(r32 - 1, std::memory_order_relaxed);
        share(w).status.done.store(r32 - 1, std::memory_order_relaxed);
      }
      last = r;
    }
    // Publish the region to the workers that exist (1 .. workers; the caller runs the shares of any
    // the OS refused): body and nt, then region (release: a worker that reads it sees them), then
    // go, the word the worker spins or sleeps on.
    for (int w = 1; w <= workers; ++w) {
      Mailbox& m = share(w).mail;
      m.body.emplace(body);
      m.nt = nt;
      m.region.store(r, std::memory_order_release);
      m.go.store(r32, std::memory_order_release);
    }
    // go before `sleeping` (the worker: `sleeping`, then go; Dekker), so no wake-up is lost.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (int w = 1; w <= workers; ++w)
      if (share(w).status.sleeping.load(std::memory_order_relaxed)) futex_wake_one(share(w).mail.go);
    t_in_region = true;
    first_error_.run(body, 0, nt);
    // Shares that no thread has started (a late worker's, or one the OS gave no thread): the caller's.
    for (int w = 1; w < nt; ++w)
      if (take_if_unstarted(w, r)) run_share(body, w, nt, r);
    t_in_region = false;
    const bool spin = !passive_wait();
    for (int w = 1; w < nt; ++w) wait_done(w, r32, spin);
    // Every share has finished: what one of them threw goes to the caller (and not to the next region).
    first_error_.rethrow();
  }

  /// After fork(): the child has none of the parent's workers.
  void forget_workers() {
    // The std::thread objects name threads of the parent: never joined nor destroyed here (a
    // joinable std::thread's destructor terminates); they are leaked, and so are the shares' words
    // (a parent's worker may have been inside one): the child starts with fresh ones.
    (void)new std::vector<std::thread>(std::move(workers_));
    workers_.clear();
    (void)shares_.release();
    shares_ = make_shares();
    last_region_.assign(last_region_.size(), 0);  // fresh shares: started / done 0
    new (&run_mu_) std::mutex;  // in case the fork happened while another thread held it
    // Likewise the error slot: a region of the parent's may have kept an exception it had not yet
    // rethrown (it is the parent's; leaked here, never rethrown by the child's next region).
    new (&first_error_) FirstError;
  }

 private:
  /// What the caller publishes to worker w for each region (written by the caller only, while no
  /// share of the previous region is running; read by worker w after it claimed its share).
  struct alignas(64) Mailbox {
    std::atomic<std::uint32_t> go{0};        ///< low 32 bits of `region`: the futex word worker w waits on
    std::atomic<std::uint64_t> region{0};    ///< the region's number (1, 2, …; 64 bits, never wraps)
    int nt = 0;
    std::optional<RegionBody> body;
  };
  /// Share w's claim: the last region whose share w some thread took (compare-and-swap). Its own
  /// cache line, written by worker w alone unless another thread takes a late worker's share, so
  /// the worker's claim does not wait for the line to come back from another core.
  struct alignas(64) Claim {
    std::atomic<std::uint64_t> claimed{0};
  };
  /// Share w's progress, written by the thread that runs it (started, done) and by worker w
  /// (sleeping); read by the caller. Low 32 bits of region numbers.
  struct alignas(64) Status {
    std::atomic<std::uint32_t> started{0};
    std::atomic<std::uint32_t> done{0};  ///< futex word the caller waits on
    std::atomic<bool> sleeping{false};   ///< worker w is (about to be) in its futex wait on go
  };
  struct Share {
    Mailbox mail;
    Claim claim;
    Status status;
  };

  Pool() : shares_(make_shares()), last_region_(static_cast<std::size_t>(std::max(1, available_cpus())), 0) { pthread_atfork(nullptr, nullptr, [] { get().forget_workers(); }); }

  /// One Share per possible worker (1 .. CPUs − 1; one spare), made with the pool (and again in a
  /// forked child), never resized: a worker reads others' claim words while the caller may be
  /// starting more workers.
  static std::unique_ptr<Share[]> make_shares() {
    return std::make_unique<Share[]>(static_cast<std::size_t>(std::max(1, available_cpus())));
  }
  Share& share(int w) { return shares_[static_cast<std::size_t>(w - 1)]; }

  /// Takes share w of region r unless some thread already has: true for exactly one thread.
  bool try_claim(int w, std::uint64_t r) {
    std::atomic<std::uint64_t>& c = share(w).claim.claimed;
    for (std::uint64_t v = c.load(std::memory_order_relaxed); v < r;)
      if (c.compare_exchange_weak(v, r, std::memory_order_acq_rel, std::memory_order_relaxed)) return true;
    return false;
  }

  /// try_claim for another thread's share: first its Status line (which the caller reads anyway), so
  /// that a share already started or done costs no touch of its claim line, which would otherwise
  /// have to come back to its worker's core for that worker's next claim.
  bool take_if_unstarted(int w, std::uint64_t r) {
    const Status& st = share(w).status;
    const auto r32 = static_cast<std::uint32_t>(r);
    if (st.started.load(std::memory_order_relaxed) == r32 || st.done.load(std::memory_order_relaxed) == r32) return false;
    return try_claim(w, r);
  }

  /// Runs claimed share w of region r and marks it done (waking the caller if it sleeps on it).
  void run_share(const RegionBody& body, int w, int nt, std::uint64_t r) {
    Status& st = share(w).status;
    st.started.store(static_cast<std::uint32_t>(r), std::memory_order_relaxed);
    first_error_.run(body, w, nt);
    st.done.store(static_cast<std::uint32_t>(r), std::memory_order_seq_cst);
    if (caller_sleeping_on_.load(std::memory_order_seq_cst) == w) futex_wake_one(st.done);
  }

  /// Returns once share w of the region numbered r32 has finished: spinning for up to
  /// kSpinMicroseconds when `spin`, then blocked in a futex wait on its done word (whoever finishes
  /// it wakes a sleeping caller), so a caller never holds a CPU that a worker of its region needs.
  void wait_done(int w, std::uint32_t r32, bool spin) {
    using Clock = std::chrono::steady_clock;
    std::atomic<std::uint32_t>& done = share(w).status.done;
    const auto t0 = Clock::now();
    for (int i = 1; done.load(std::memory_order_acquire) != r32; ++i) {
      _mm_pause();
      if (i % 256 == 0 && (!spin || Clock::now() - t0 > std::chrono::microseconds(kSpinMicroseconds))) break;
    }
    for (std::uint32_t d; (d = done.load(std::memory_order_seq_cst)) != r32;) {
      caller_sleeping_on_.store(w, std::memory_order_seq_cst);
      if ((d = done.load(std::memory_order_seq_cst)) != r32) futex_wait(done, d);
      caller_sleeping_on_.store(0, std::memory_order_seq_cst);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
  }

  /// Starts workers up to n_workers; returns how many there are, at most n_workers.
  int grow(int n_workers) {
    while (static_cast<int>(workers_.size()) < n_workers) {
      try {
        const int w = static_cast<int>(workers_.size()) + 1;
        workers_.emplace_back([this, w] { work(w); });
        // Named here, before the region that needs it starts (top -H, perf, tests that look for it).
        char name[16];
        std::snprintf(name, sizeof name, "mamba-cpu-%u", static_cast<unsigned>(w) % 100000u);  // ≤ 15 characters
        pthread_setname_np(workers_.back().native_handle(), name);
      } catch (const std::exception&) {  // EAGAIN (the process's thread limit) or out of memory
        break;
      }
    }
    return std::min(n_workers, static_cast<int>(workers_.size()));
  }

  void work(int w) {
    using Clock = std::chrono::steady_clock;
    Mailbox& mail = share(w).mail;
    Status& status = share(w).status;
    std::uint32_t seen = 0;  // go starts at 0
    const bool spin = !passive_wait();  // regions here never have more threads than CPUs
    for (;;) {
      std::uint32_t g = mail.go.load(std::memory_order_acquire);
      if (g == seen) {
        const auto t0 = Clock::now();
        for (int i = 1; (g = mail.go.load(std::memory_order_acquire)) == seen; ++i) {
          _mm_pause();
          if (i % 256 == 0 && (!spin || Clock::now() - t0 > std::chrono::microseconds(kSpinMicroseconds))) {
            status.sleeping.store(true, std::memory_order_seq_cst);
            if (mail.go.load(std::memory_order_seq_cst) == seen) futex_wait(mail.go, seen);
            status.sleeping.store(false, std::memory_order_seq_cst);
          }
        }
      }
      seen = g;
      // The newest region (possibly newer than g); its share w unless another thread took it, in
      // which case the region may be over and its body is not touched.
      const std::uint64_t r = mail.region.load(std::memory_order_acquire);
      if (!try_claim(w, r)) continue;
      // Share w of r is ours: r cannot end before it is done, so its mailbox stays as published.
      const RegionBody body = *mail.body;
      const int nt = mail.nt;
      t_in_region = true;
      run_share(body, w, nt, r);
      // Then any share of r that no thread has taken (a late worker's).
      for (int v = 1; v < nt; ++v)
        if (v != w && take_if_unstarted(v, r)) run_share(body, v, nt, r);
      t_in_region = false;
    }
  }

  std::mutex run_mu_;
  std::vector<std::thread> workers_;  // workers_[w − 1]: worker w
  std::unique_ptr<Share[]> shares_;   // shares_[w − 1]: share w's words (worker w's mailbox)
  alignas(64) std::uint64_t region_ = 0;  ///< the last region's number, written under run_mu_ (its own line: workers read shares_)
  std::vector<std::uint64_t> last_region_;  ///< [w − 1]: the last region with share w (under run_mu_)
  alignas(64) std::atomic<int> caller_sleeping_on_{0};  ///< the share the caller sleeps on, or 0
  FirstError first_error_;  ///< the current region's first exception
};

}  // namespace

int pool_cpus() { return available_cpus(); }

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
