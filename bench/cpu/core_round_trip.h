// Core-to-core handoff latency: how the host placed the threads (issue 5's decode rows).
#pragma once

namespace mamba::bench {

/// Median time, in nanoseconds, for one round trip of a cache line between the calling thread and
/// a second thread (each waits, spinning, for the other's store to one shared atomic int, then
/// answers: 2 handoffs), over `rounds` round trips in 5 batches. The threads are not pinned: the OS
/// places the two spinning threads on two CPUs, as it does the compute pool's, so on a small VM this
/// is the handoff cost every parallel region and every activation read across threads pays there.
///
/// Why it is measured: on the 2-vCPU VMs this project was measured on, the host moved the vCPUs
/// between two placements within seconds: ~50–60 ns round trips with ~35 GB/s of read bandwidth
/// (as cores sharing a cache), or ~300–350 ns with 50–70 GB/s (as cores that do not, each with its
/// own path to memory). The bandwidth probes alone read that as a host whose speed swings
/// (docs/PERFORMANCE.md, 2026-12-05 noon).
/// Stops after ~0.2 s (two threads sharing one CPU hand off once per scheduler slice) with the
/// median of the batches done. Returns 0 when a second thread cannot be started, or `rounds` < 5.
double core_round_trip_ns(int rounds = 20000);

}  // namespace mamba::bench
