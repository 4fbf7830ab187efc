// The kernels of kernels.h for the avx2 target (32-byte vectors); see kernels_impl.inc.
#define MAMBA_SIMD_BYTES 32
#include "ops/cpu/kernels.h"
#include "ops/cpu/simd.h"

namespace mamba::ops::cpu::avx2 {
#include "ops/cpu/kernels_impl.inc"
}  // namespace mamba::ops::cpu::avx2
