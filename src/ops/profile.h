// Per-op wall-clock accounting, for benches (bench/bench_cpu prints the prefill split from it).
//
// Off by default: then a ProfileScope costs one relaxed atomic load. When on, each public op
// (ops.h) adds its wall time and one call to its OpKind's totals. Ops are called from one thread at
// a time (the model's), so the totals are plain sums; times include the op's parallel region.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace mamba::ops {

/// What an op is accounted as. kLinear = every projection GEMM/GEMV (incl. lm_head); kConv =
/// causal conv1d + SiLU; kScan = Mamba-1 selective scan / Mamba-2 SSD; kNorm = RMSNorm and the
/// grouped gated norm, and the residual add fused with the next norm (add_rms_norm); kElementwise =
/// softplus/clamp, silu·mul; kEmbedding = lookup.
enum class OpKind : int { kLinear, kConv, kScan, kNorm, kElementwise, kEmbedding, kCount };
inline constexpr int kOpKinds = static_cast<int>(OpKind::kCount);
/// "linear", "conv", "scan", "norm", "elementwise", "embedding".
const char* op_kind_name(OpKind k);

/// Totals since the last profile_reset(): seconds and calls per OpKind.
struct OpProfile {
  std::array<double, kOpKinds> seconds{};
  std::array<std::int64_t, kOpKinds> calls{};
  double total_seconds() const;
};

void profile_enable(bool on);
void profile_reset();
OpProfile profile_read();

namespace detail {
extern std::atomic<bool> g_profile_on;
void profile_add(OpKind k, double seconds);
}  // namespace detail

/// RAII: accounts the enclosing scope's wall time to `k` when profiling is on.
class ProfileScope {
 public:
  explicit ProfileScope(OpKind k) : kind_(k), on_(detail::g_profile_on.load(std::memory_order_relaxed)) {
    if (on_) t0_ = std::chrono::steady_clock::now();
  }
  ~ProfileScope() {
    if (on_)
      detail::profile_add(kind_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  OpKind kind_;
  bool on_;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace mamba::ops
