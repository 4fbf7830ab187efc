// The CPU backend's compute threads: a persistent pool whose workers spin briefly between regions,
// so one region (a decode step has ~6 per layer) costs about one cache-line round trip between
// cores instead of an OpenMP fork/join (measured on the 2-core Zen 5 guest: libgomp 3.1 µs per
// `parallel` region, 1.5 µs per barrier; a core-to-core round trip 0.45–0.53 µs; a decode step of
// the 130m models runs ~145 regions).
//
// Semantics: parallel_region(nt, body) runs body(t, nt) exactly once for every t in [0, nt) and
// returns when all have returned (their writes are then visible to the caller). Each t runs on
// whichever thread claims it first: the calling thread starts with t = 0 and then takes any t that
// no worker has claimed yet (a late or descheduled worker's share), so bodies must not depend on
// which thread runs them (per-thread scratch as thread_local, not by t's thread) nor wait for one
// another (no barriers inside a region). Calls from several threads are serialised; a call from
// inside a region runs body(0, 1) on that thread.
// Workers (and the caller, waiting for them) spin for 0.5 ms, then sleep (futex); with
// OMP_WAIT_POLICY=passive nobody spins. A region of more threads than CPUs runs as an OpenMP region
// (libgomp time-slices an oversubscribed team far better than per-region wake-ups).
// Bodies must not throw.
#pragma once

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

/// Runs body(t, nt) for t in [0, nt) on nt threads (the caller is t = 0); nt ≤ 1: body(0, 1) here.
void parallel_region(int nt, RegionBody body);

/// Items [0, n) in nt = min(num_threads(), n) contiguous ranges, f(begin, end) once per thread
/// (thread t: [n·t/nt, n·(t+1)/nt)); all on the caller as f(0, n) when !parallel or one thread.
/// A deterministic split: the same items go to the same thread on every call.
template <class F>
void parallel_for(std::int64_t n, bool parallel, F&& f);

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

}  // namespace mamba::ops::cpu
