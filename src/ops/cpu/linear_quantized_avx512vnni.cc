// AVX-512 VNNI kernel of the quantized linear (computation defined in quant_kernels.h): the AVX2
// kernel with each group's 32 int8 products summed by one vpdpbusd (256-bit, AVX512VL + VNNI) on
// |x| · sign(w, x) instead of vpmaddubsw + vpmaddwd. Same int32 sums, same fp32 order → bitwise
// equal to every other target.
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/quant_kernels.h"

namespace mamba::ops::cpu::quant {

namespace {
inline __m256i qdot_group_vnni(__m256i xv, __m256i wv) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(xv), _mm256_sign_epi8(wv, xv));
}
}  // namespace

#define MAMBA_QDOT_GROUP qdot_group_vnni
#define MAMBA_QDOT_ROWS dot_rows_avx512vnni
#include "ops/cpu/linear_quantized_kernel.inc"
#undef MAMBA_QDOT_GROUP
#undef MAMBA_QDOT_ROWS

}  // namespace mamba::ops::cpu::quant
