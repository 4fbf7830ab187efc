// The kernels of kernels.h for the avx512 target (64-byte vectors); see kernels_impl.inc.
#define MAMBA_SIMD_BYTES 64

// GCC 12 reports its own _mm512_undefined_ps() (inside _mm512_scalef_ps, simd.h's vexp) as
// "(maybe) uninitialized" once it is inlined here: a known false positive (as in linear_avx512.cc).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "ops/cpu/kernels.h"
#include "ops/cpu/simd.h"

namespace mamba::ops::cpu::avx512 {
#include "ops/cpu/kernels_impl.inc"
}  // namespace mamba::ops::cpu::avx512
