// The kernels of kernels.h for the avx512 target (64-byte vectors); see kernels_impl.inc.
#define MAMBA_SIMD_BYTES 64
#include "ops/cpu/kernels.h"
#include "ops/cpu/simd.h"

namespace mamba::ops::cpu::avx512 {
#include "ops/cpu/kernels_impl.inc"
}  // namespace mamba::ops::cpu::avx512
