// cpu_kernels(): the kernels.h table of the current dispatch target.
#include "ops/cpu/kernels.h"

#include "ops/cpu/cpu_target.h"

namespace mamba::ops::cpu {

const Kernels& cpu_kernels() {
  switch (cpu_target()) {
    case CpuTarget::kAvx512: return avx512::kKernels;
    case CpuTarget::kAvx2: return avx2::kKernels;
    default: return baseline::kKernels;
  }
}

}  // namespace mamba::ops::cpu
