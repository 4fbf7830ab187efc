// The kernels of kernels.h for the baseline target (16-byte vectors); see kernels_impl.inc.
#define MAMBA_SIMD_BYTES 16
#include "ops/cpu/kernels.h"
#include "ops/cpu/simd.h"

namespace mamba::ops::cpu::baseline {
#include "ops/cpu/kernels_impl.inc"
}  // namespace mamba::ops::cpu::baseline
