// Streaming read bandwidth: the memory ceiling of batch-1 decode (issue 5).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mamba::bench {

/// Result of read_bandwidth(): best (highest) of the passes, in GB/s (1e9 bytes per second).
struct Bandwidth {
  double gbps = 0;
  std::size_t bytes = 0;     ///< buffer size read per pass
  std::string kernel;        ///< "avx2", "avx2 3-stream" or "baseline" (which read loop was best)
};

/// Reads a buffer of `bytes` (rounded down to 4 KiB; allocated, huge-page advised and first-touched
/// by the same `threads` that read it) `passes` times from start to end, each thread summing its
/// contiguous share as 64-bit integers (vector loads: AVX2 when the CPU has it, else the baseline
/// loop GCC vectorises to SSE2), and returns the best pass. With AVX2 every pass runs two loops,
/// the share as one sequential stream and as three streams side by side (its thirds), and the
/// best of either counts (`kernel` says which: "avx2" / "avx2 3-stream"): some CPUs (Zen 3 here)
/// reach their bandwidth only with several streams per core, as the decode GEMV reads its rows.
/// `threads` ≥ 1. The buffer should be ≥ 4× the last-level cache, or the figure measures the cache.
/// Allocation failure → gbps = 0.
Bandwidth read_bandwidth(std::size_t bytes, int threads, int passes);

/// Last-level cache size in bytes (sysfs of cpu0, else sysconf; 0 when unknown).
std::size_t last_level_cache_bytes();

namespace detail {
/// Sum of p[0..n) as uint64 (wrapping). n % 16 == 0, p 64-byte aligned. Baseline / AVX2 versions.
std::uint64_t read_sum_baseline(const std::uint64_t* p, std::size_t n);
std::uint64_t read_sum_avx2(const std::uint64_t* p, std::size_t n);
/// The same sum read as 3 streams (the 3 thirds of p[0..n) side by side). AVX2.
std::uint64_t read_sum_avx2_streams(const std::uint64_t* p, std::size_t n);
}  // namespace detail

}  // namespace mamba::bench
