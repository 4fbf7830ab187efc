// Streaming read bandwidth (see bandwidth.h).
#include "cpu/bandwidth.h"

#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "ops/cpu/cpu_target.h"

namespace mamba::bench {

namespace detail {
std::uint64_t read_sum_baseline(const std::uint64_t* p, std::size_t n) {
  // Integer adds are associative, so GCC vectorises this (SSE2 on the baseline) without -ffast-math.
  std::uint64_t s[8] = {};
  for (std::size_t i = 0; i < n; i += 8)
    for (std::size_t j = 0; j < 8; ++j) s[j] += p[i + j];
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}
}  // namespace detail

std::size_t last_level_cache_bytes() {
  // sysfs first: under a hypervisor glibc's cpuid-based sysconf can report the host's cache.
  std::size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_f(dir + "level"), type_f(dir + "type"), size_f(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_f >> level) || !(type_f >> type) || !(size_f >> size)) break;
    if (type == "Instruction" || level < best_level) continue;
    char* end = nullptr;
    std::size_t v = std::strtoull(size.c_str(), &end, 10);
    if (end && (*end == 'K' || *end == 'k')) v <<= 10;
    if (end && *end == 'M') v <<= 20;
    best = v;
    best_level = level;
  }
  if (best > 0) return best;
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long v = sysconf(name);
    if (v > 0) return static_cast<std::size_t>(v);
  }
  return 0;
}

Bandwidth read_bandwidth(std::size_t bytes, int threads, int passes) {
  Bandwidth r;
  constexpr std::size_t kAlign = std::size_t{2} << 20;  // 2 MiB: lets the kernel back it with huge pages
  bytes = std::max<std::size_t>(bytes / 4096 * 4096, 4096);
  const std::size_t alloc = (bytes + kAlign - 1) / kAlign * kAlign;
  auto* buf = static_cast<std::uint64_t*>(std::aligned_alloc(kAlign, alloc));
  if (!buf) return r;
  madvise(buf, alloc, MADV_HUGEPAGE);  // advisory; fewer TLB misses when granted
  const std::size_t n = bytes / sizeof(std::uint64_t);
  // Each thread's share: contiguous, a multiple of 16 words (one 128-byte step of the AVX2 loop).
  const std::size_t per = (n / static_cast<std::size_t>(threads)) / 16 * 16;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int t = 0; t < threads; ++t) {
    std::uint64_t* p = buf + static_cast<std::size_t>(t) * per;
    for (std::size_t i = 0; i < per; ++i) p[i] = i ^ static_cast<std::size_t>(t);
  }
  const bool avx2 = ops::cpu::cpu_target() >= ops::cpu::CpuTarget::kAvx2;
  r.kernel = avx2 ? "avx2" : "baseline";
  r.bytes = per * static_cast<std::size_t>(threads) * sizeof(std::uint64_t);
  volatile std::uint64_t sink = 0;
  double best[2] = {1e30, 1e30};  // [one stream, three streams] per thread
  for (int pass = 0; pass < passes; ++pass) {
    for (int kind = 0; kind < (avx2 ? 2 : 1); ++kind) {
      std::uint64_t total = 0;
      const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static) num_threads(threads) reduction(+ : total)
      for (int t = 0; t < threads; ++t) {
        const std::uint64_t* p = buf + static_cast<std::size_t>(t) * per;
        total += !avx2 ? detail::read_sum_baseline(p, per) : kind == 0 ? detail::read_sum_avx2(p, per)
                                                                        : detail::read_sum_avx2_streams(p, per);
      }
      best[kind] = std::min(best[kind], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      sink = sink + total;
    }
  }
  std::free(buf);
  if (avx2 && best[1] < best[0]) r.kernel = "avx2 3-stream";
  r.gbps = static_cast<double>(r.bytes) / std::min(best[0], best[1]) / 1e9;
  return r;
}

}  // namespace mamba::bench
