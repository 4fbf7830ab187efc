// Placeholder until the quantized kernels land: no loader produces kQ8/kQ4 views yet.
#include <cstdio>
#include <cstdlib>

#include "ops/cpu/quantized.h"

namespace mamba::ops::cpu {

void linear_quantized(const float*, std::int64_t, std::int64_t, const TensorView&, const TensorView&, float*,
                      std::int64_t) {
  std::fprintf(stderr, "internal error: quantized linear is not implemented yet\n");
  std::abort();
}

void embedding_quantized(const TensorView&, std::span<const std::int32_t>, float*) {
  std::fprintf(stderr, "internal error: quantized embedding is not implemented yet\n");
  std::abort();
}

}  // namespace mamba::ops::cpu
