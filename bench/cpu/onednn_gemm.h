// GEMM ceiling: oneDNN matmul throughput at a given shape (issue 5's "GEMM rate").
//
// Built with oneDNN when CMake found it (MAMBA_HAVE_DNNL); otherwise every call reports "not
// measured" and bench_cpu prints "oneDNN not found: GEMM ceiling not measured".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mamba::bench {

/// Precision of a measured matmul. kF32: f32 × f32 → f32. kBF16: bf16 × bf16 → f32 (only where the
/// CPU has AVX-512 BF16). kInt8: u8 activations × s8 weights → s32 (the ceiling for q8/q4 weights).
enum class GemmType { kF32, kBF16, kInt8 };
const char* gemm_type_name(GemmType t);  // "f32", "bf16", "int8"

/// True when built with oneDNN.
bool onednn_available();
/// "oneDNN 2.6.3" or "oneDNN not found".
std::string onednn_version();
/// Whether `t` is worth measuring on this CPU (bf16 needs AVX-512 BF16; without it oneDNN would
/// emulate it and the figure would not be a ceiling).
bool onednn_supports(GemmType t);

/// One measurement of y[M, N] = x[M, K] · W[K, N] (PyTorch's x · Wᵀ for W stored [N, K]).
struct GemmRate {
  double gflops = 0;     ///< 2·M·K·N ÷ best call time, 1e9/s (GOP/s for int8)
  double seconds = 0;    ///< best call time
  std::string impl;      ///< oneDNN's implementation name (e.g. "brg:avx2")
  /// cpu_time.h's cpu_share over the timed calls (OpenMP threads; none below kGemmShareMinSeconds).
  /// Low on a prefill-sized call: another process took a core, and the rate (a ceiling) came out low.
  /// (oneDNN runs small calls on fewer threads by its own choice: their share says nothing.)
  std::optional<double> cpu_share;
};

/// Times oneDNN matmul at (M, K, N) in precision `t` on omp_get_max_threads() threads. The weights
/// are in the layout oneDNN prefers (reordered once, not timed), `weight_copies` ≥ 1 distinct
/// copies used in turn, so decode-sized calls (small M) read their weights from memory as decode
/// does rather than from cache. Repeats until `min_seconds` have passed (at least 3 calls after a
/// warm-up) and keeps the best call. nullopt when built without oneDNN, `t` is unsupported, or
/// oneDNN refused the shape.
std::optional<GemmRate> onednn_gemm(std::int64_t M, std::int64_t K, std::int64_t N, GemmType t, int weight_copies,
                                    double min_seconds);

}  // namespace mamba::bench
