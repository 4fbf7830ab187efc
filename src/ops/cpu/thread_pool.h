// The CPU backend's compute threads: a persistent pool whose workers spin briefly between regions,
// so one region (a decode step has 4–6 per layer) costs about one cache-line round trip between
// cores instead of an OpenMP fork/join (measured on the 2-core Zen 5 guest: libgomp 3.1 µs per
// `parallel` region, 1.5 µs per barrier; a core-to-core round trip 0.45–0.53 µs, an empty region
// 0.46 µs; a decode step of the 130m models runs ~100–150 regions).
//
// Semantics: parallel_region(nt, body) runs body(t, nt) exactly once for every t in [0, nt) and
// returns when all have returned (their writes are then visible to the caller). Each t runs on
// whichever thread claims it first: the calling thread starts with t = 0 and then takes any t that
// no worker has claimed yet (a late or descheduled worker's share), as does a worker once its own
// share is done, so bodies must not depend on
// which thread runs them (per-thread scratch as thread_local, not by t's thread) nor wait for one
// another (no barriers inside a region). Calls from several threads are serialised; a call from
// inside a region runs body(0, 1) on that thread.
// Workers (and the caller, waiting for them) spin for 0.5 ms, then sleep (futex); with
// OMP_WAIT_POLICY=passive each spins only ~5 µs. A region of more threads than CPUs (pool_cpus())
// runs as an OpenMP region (libgomp time-slices an oversubscribed team far better than per-region
// wake-ups).
// A body may throw (std::bad_alloc from a per-thread scratch buffer that cannot grow): its share
// then counts as finished, the region's other shares still run, and once all have finished the
// first exception is rethrown on the calling thread (whichever thread threw it), where the
// forward pass turns it into an error for that call (MambaModel::forward, Scheduler::run).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "ops/ops.h"

namespace mamba::ops::cpu {

/// A non-owning reference to a callable void(int t, int nt), valid while the callable lives.
class RegionBody {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RegionBody>>>
  RegionBody(F&& f)  // NOLINT(google-explicit-constructor): built from lambdas at the call sites
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, int t, int nt) { (*static_cast<std::remove_reference_t<F>*>(o))(t, nt); }) {}
  void operator()(int t, int nt) const { call_(obj_, t, nt); }

 private:
  void* obj_;
  void (*call_)(void*, int, int);
};

/// The CPU count the pool is sized by, read once: usable_cpus(), or MAMBA_TEST_POOL_CPUS = N (1 to
/// kMaxThreads; for tests only). Regions of up to that many threads run on the pool's workers, more
/// as OpenMP regions. The override lets a 2-CPU CI machine run regions of several workers (time-
/// sliced), so that the paths only machines of 3+ CPUs take otherwise, such as a worker running a
/// late worker's share, are tested there (ctest's ops.pool_of_4_cpus). Not for production: more
/// workers than CPUs only take turns.
int pool_cpus();

/// Runs body(t, nt) for t in [0, nt) on nt threads (the caller is t = 0); nt ≤ 1: body(0, 1) here.
/// Throws the first exception a share threw, after every share has finished (the header's note).
void parallel_region(int nt, RegionBody body);

/// Items [0, n) in nt = min(num_threads(), n) contiguous ranges, f(begin, end) once per thread
/// (thread t: [n·t/nt, n·(t+1)/nt)); all on the caller as f(0, n) when !parallel or one thread.
/// A deterministic split: the same items go to the same thread on every call.
template <class F>
void parallel_for(std::int64_t n, bool parallel, F&& f);

/// Items [0, n) over nt = min(num_threads(), ⌈n / grain⌉) threads, balanced at run time: thread t
/// owns the contiguous range [n·t/nt, n·(t+1)/nt) (in whole grains) and takes it front to back,
/// each call f(begin, end) half of what is left of it (at least one grain: a few long calls, so a
/// kernel's prefetch runs ahead over most of the range); once its range is used up it takes one
/// grain at a time from the BACK of another thread's range until none is left. So when one core
/// runs slower (a shared host, another process, a busier SMT sibling) the other ends its tail
/// instead of waiting for it (the 2-vCPU Zen 5 guest's cores took turns running cache-heavy code
/// 30–40% slower, minutes at a time: docs/PERFORMANCE.md, 2026-12-06 mid-morning). Which thread runs an item varies from call to call, and so does how
/// the items are cut into calls: f must compute each item the same way whatever range it comes
/// in and whoever runs it (the kernels here do: per-output fixed orders). All on the caller as
/// f(0, n) when !parallel or one thread; more than kMaxBalancedThreads threads, or more than 2³²
/// grains: the static split of parallel_for.
template <class F>
void parallel_for_balanced(std::int64_t n, std::int64_t grain, bool parallel, F&& f);

/// Most threads parallel_for_balanced keeps cursors for (on the caller's stack).
inline constexpr int kMaxBalancedThreads = 64;

template <class F>
void parallel_for(std::int64_t n, bool parallel, F&& f) {
  const int T = num_threads();
  const int nt = static_cast<int>(n < T ? n : T);
  if (!parallel || nt <= 1) {
    if (n > 0) f(std::int64_t{0}, n);
    return;
  }
  parallel_region(nt, [&](int t, int k) { f(n * t / k, n * (t + 1) / k); });
}

template <class F>
void parallel_for_balanced(std::int64_t n, std::int64_t grain, bool parallel, F&& f) {
  if (grain < 1) grain = 1;
  const std::int64_t grains = (n + grain - 1) / grain;
  const int T = num_threads();
  const int nt = static_cast<int>(grains < T ? grains : T);
  if (!parallel || nt <= 1) {
    if (n > 0) f(std::int64_t{0}, n);
    return;
  }
  if (nt > kMaxBalancedThreads || grains > 0xFFFFFFFF) return parallel_for(n, parallel, std::forward<F>(f));
  // Cursor t: front (high 32 bits) and back (low 32) of thread t's range, in grains; one cache
  // line each, so an owner's claims touch no other thread's line until it steals.
  struct alignas(64) Cursor {
    std::atomic<std::uint64_t> fb;
  };
  Cursor cur[kMaxBalancedThreads];
  for (int t = 0; t < nt; ++t)
    cur[t].fb.store(static_cast<std::uint64_t>(grains * t / nt) << 32 | static_cast<std::uint64_t>(grains * (t + 1) / nt),
                    std::memory_order_relaxed);
  // Claims grains from cursor c until it is empty, calling f on each claim: from the front, half of
  // what is left each time (the owner), or from the back, one grain at a time (another thread).
  auto drain = [&](Cursor& c, bool owner) {
    for (std::uint64_t v = c.fb.load(std::memory_order_relaxed);;) {
      const std::uint64_t front = v >> 32, back = v & 0xFFFFFFFFu;
      if (front >= back) return;
      const std::uint64_t take = owner ? (back - front + 1) / 2 : 1;
      const std::uint64_t g0 = owner ? front : back - 1;
      if (!c.fb.compare_exchange_weak(v, owner ? (front + take) << 32 | back : front << 32 | (back - 1),
                                      std::memory_order_relaxed))
        continue;  // v holds the current word
      const std::int64_t b = static_cast<std::int64_t>(g0) * grain, e = static_cast<std::int64_t>(g0 + take) * grain;
      f(b, e < n ? e : n);
      v = c.fb.load(std::memory_order_relaxed);
    }
  };
  parallel_region(nt, [&](int t, int threads) {
    if (threads == 1) {  // run on this thread alone (a region nested in another): one call
      f(std::int64_t{0}, n);
      return;
    }
    drain(cur[t], true);  // own range, front to back
    for (int i = 1; i < nt; ++i) drain(cur[(t + i) % nt], false);  // then the others' tails
  });
}

}  // namespace mamba::ops::cpu
