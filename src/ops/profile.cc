// Per-op wall-clock accounting (see profile.h).
#include "ops/profile.h"

namespace mamba::ops {
namespace {
OpProfile g_totals;
}

namespace detail {
std::atomic<bool> g_profile_on{false};
void profile_add(OpKind k, double seconds) {
  g_totals.seconds[static_cast<std::size_t>(k)] += seconds;
  g_totals.calls[static_cast<std::size_t>(k)] += 1;
}
}  // namespace detail

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kLinear: return "linear";
    case OpKind::kConv: return "conv";
    case OpKind::kScan: return "scan";
    case OpKind::kNorm: return "norm";
    case OpKind::kElementwise: return "elementwise";
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kCount: break;
  }
  return "?";
}

double OpProfile::total_seconds() const {
  double s = 0;
  for (double v : seconds) s += v;
  return s;
}

void profile_enable(bool on) { detail::g_profile_on.store(on, std::memory_order_relaxed); }
void profile_reset() { g_totals = OpProfile{}; }
OpProfile profile_read() { return g_totals; }

}  // namespace mamba::ops
