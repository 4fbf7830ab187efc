// AVX2 read loop of read_bandwidth() (compiled with -mavx2; entered only when the CPU has AVX2).
#include <immintrin.h>

#include "cpu/bandwidth.h"

namespace mamba::bench::detail {

std::uint64_t read_sum_avx2(const std::uint64_t* p, std::size_t n) {
  // Four independent accumulators of 256-bit loads: 128 bytes per iteration, far more than one core's
  // share of DRAM bandwidth, so the loop waits on memory, not on the adds.
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (std::size_t i = 0; i < n; i += 16) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

std::uint64_t read_sum_avx2_streams(const std::uint64_t* p, std::size_t n) {
  // The range as 3 consecutive thirds read side by side: 3 sequential streams far apart (one stream
  // per core leaves some CPUs, e.g. Zen 3, ~15% below what several streams reach). Three, not four:
  // quarters of a power-of-two buffer are a power of two apart and collide in the caches.
  const std::size_t q = n / 3 / 4 * 4;  // words per stream, whole 256-bit loads
  const std::uint64_t *p0 = p, *p1 = p + q, *p2 = p + 2 * q;
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0;
  for (std::size_t i = 0; i < q; i += 4) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p0 + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p1 + i)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p2 + i)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), a2);
  alignas(32) std::uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  std::uint64_t r = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (std::size_t i = 3 * q; i < n; ++i) r += p[i];
  return r;
}

}  // namespace mamba::bench::detail
