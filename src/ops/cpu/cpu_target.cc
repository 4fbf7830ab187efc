// Run-time detection of the dispatch target (see cpu_target.h).
#include "ops/cpu/cpu_target.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <string>
#include <unistd.h>

namespace mamba::ops::cpu {
namespace {

bool has(const char* feature) {
#if defined(__x86_64__) || defined(__i386__)
  // __builtin_cpu_supports needs a literal; map the few names used here.
  if (!std::strcmp(feature, "avx2")) return __builtin_cpu_supports("avx2");
  if (!std::strcmp(feature, "fma")) return __builtin_cpu_supports("fma");
  if (!std::strcmp(feature, "f16c")) return __builtin_cpu_supports("f16c");
  if (!std::strcmp(feature, "avx512f")) return __builtin_cpu_supports("avx512f");
  if (!std::strcmp(feature, "avx512bw")) return __builtin_cpu_supports("avx512bw");
  if (!std::strcmp(feature, "avx512vl")) return __builtin_cpu_supports("avx512vl");
  if (!std::strcmp(feature, "avx512dq")) return __builtin_cpu_supports("avx512dq");
  if (!std::strcmp(feature, "avx512vnni")) return __builtin_cpu_supports("avx512vnni");
  if (!std::strcmp(feature, "avx512bf16")) return __builtin_cpu_supports("avx512bf16");
#endif
  return false;
}

CpuTarget best_supported() {
  const bool avx2 = has("avx2") && has("fma") && has("f16c");
  if (avx2 && has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq")) return CpuTarget::kAvx512;
  if (avx2) return CpuTarget::kAvx2;
  return CpuTarget::kBaseline;
}

/// The target in use and why it was chosen (cpu_target_description()).
struct Choice {
  CpuTarget target;
  std::string why;
};

std::string detected_why(CpuTarget best) {
  switch (best) {
    case CpuTarget::kAvx512:
      return fmt::format("detected; VNNI {}, BF16 {}", has("avx512vnni") ? "yes" : "no", has("avx512bf16") ? "yes" : "no");
    case CpuTarget::kAvx2: return "detected; AVX-512 not available";
    case CpuTarget::kBaseline: return "detected; AVX2+FMA+F16C not available";
  }
  return "detected";
}

Choice initial_choice() {
  const CpuTarget best = best_supported();
  const char* env = std::getenv("MAMBA_CPU_TARGET");
  if (env == nullptr || *env == '\0') return {best, detected_why(best)};
  CpuTarget want;
  if (!std::strcmp(env, "baseline")) want = CpuTarget::kBaseline;
  else if (!std::strcmp(env, "avx2")) want = CpuTarget::kAvx2;
  else if (!std::strcmp(env, "avx512")) want = CpuTarget::kAvx512;
  else {
    std::fprintf(stderr, "warning: MAMBA_CPU_TARGET=%s is not one of baseline|avx2|avx512; using %s\n", env,
                 cpu_target_name(best));
    return {best, fmt::format("{}; MAMBA_CPU_TARGET={} ignored: not one of baseline|avx2|avx512", detected_why(best), env)};
  }
  if (static_cast<int>(want) > static_cast<int>(best)) {
    std::fprintf(stderr, "warning: MAMBA_CPU_TARGET=%s is not supported by this CPU; using %s\n", env,
                 cpu_target_name(best));
    return {best, fmt::format("{}; MAMBA_CPU_TARGET={} ignored: not supported by this CPU", detected_why(best), env)};
  }
  return {want, "forced by MAMBA_CPU_TARGET"};
}

Choice& current() {
  static Choice c = initial_choice();
  return c;
}

}  // namespace

CpuTarget cpu_target() { return current().target; }

std::string cpu_target_description() {
  const Choice& c = current();
  return fmt::format("{} ({})", cpu_target_name(c.target), c.why);
}

std::vector<CpuTarget> supported_cpu_targets() {
  std::vector<CpuTarget> v;
  for (int t = 0; t <= static_cast<int>(best_supported()); ++t) v.push_back(static_cast<CpuTarget>(t));
  return v;
}

const char* cpu_target_name(CpuTarget t) {
  switch (t) {
    case CpuTarget::kBaseline: return "baseline";
    case CpuTarget::kAvx2: return "avx2";
    case CpuTarget::kAvx512: return "avx512";
  }
  return "?";
}

void set_cpu_target_for_test(CpuTarget t) { current() = {t, "set by set_cpu_target_for_test"}; }

bool cpu_has_avx512_bf16() { return cpu_target() == CpuTarget::kAvx512 && has("avx512bf16"); }
bool cpu_has_avx512_vnni() { return cpu_target() == CpuTarget::kAvx512 && has("avx512vnni"); }

std::int64_t cpu_l2_cache_bytes() {
  static const std::int64_t bytes = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<std::int64_t>(v) : std::int64_t{0};
  }();
  return bytes;
}

}  // namespace mamba::ops::cpu
