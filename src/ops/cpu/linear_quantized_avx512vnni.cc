// AVX-512 VNNI kernel of the quantized linear (computation defined in quant_kernels.h): the AVX2
// kernel with each int16 multiply-add fused into its int32 accumulation by vpdpwssd (256-bit,
// AVX512VL + VNNI). Same int32 sums, same fp32 order → bitwise equal to every other target.
#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/quant_kernels.h"

namespace mamba::ops::cpu::quant {

namespace {
inline __m256i madd16_acc(__m256i acc, __m256i a, __m256i b) { return _mm256_dpwssd_epi32(acc, a, b); }
}  // namespace

#define MAMBA_QDOT_ROWS dot_rows_avx512vnni
#include "ops/cpu/linear_quantized_kernel.inc"
#undef MAMBA_QDOT_ROWS

}  // namespace mamba::ops::cpu::quant
