// Run-time detection of the dispatch target (see cpu_target.h).
#include "ops/cpu/cpu_target.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>
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
  if (!strcasecmp(env, "baseline")) want = CpuTarget::kBaseline;  // any case (AVX2, Avx512)
  else if (!strcasecmp(env, "avx2")) want = CpuTarget::kAvx2;
  else if (!strcasecmp(env, "avx512")) want = CpuTarget::kAvx512;
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

/// The AMD CPU family (base + extended, cpuid leaf 1): 0x19 = Zen 3 / Zen 4, 0x1A = Zen 5; 0 on
/// other vendors.
unsigned amd_family() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return 0;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  if (std::strcmp(vendor, "AuthenticAMD") != 0 || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const unsigned base = (eax >> 8) & 0xF, ext = (eax >> 20) & 0xFF;
  return base == 0xF ? base + ext : base;
#else
  return 0;
#endif
}

/// AMD family 19h (Zen 3 and Zen 4; Zen 4 is the one with AVX-512).
bool amd_family_19h() { return amd_family() == 0x19; }

/// An on/off kernel tuning (weight_prefetch(), avx512_batch_tile()) and why it was chosen.
struct Tuning {
  bool on;
  std::string why;
};

/// `detected`, unless the environment variable `var` names one of its two values (`on_value` /
/// `off_value`, any case): then that, "forced by VAR". Any other non-empty value is warned about on
/// stderr and ignored (named in `why`).
Tuning tuning_from_env(const char* var, const char* on_value, const char* off_value, Tuning detected) {
  const char* env = std::getenv(var);
  if (env == nullptr || *env == '\0') return detected;
  if (!strcasecmp(env, on_value) || !strcasecmp(env, off_value))
    return {!strcasecmp(env, on_value), fmt::format("forced by {}", var)};
  std::fprintf(stderr, "warning: %s=%s is not one of %s|%s; using %s\n", var, env, on_value, off_value,
               detected.on ? on_value : off_value);
  return {detected.on, fmt::format("{}; {}={} ignored: not one of {}|{}", detected.why, var, env, on_value, off_value)};
}

/// weight_prefetch()'s choice: off on Zen 4 (AMD family 19h with AVX-512).
Tuning& prefetch_choice() {
  static Tuning p = [] {
    const bool zen4 = amd_family_19h() && best_supported() == CpuTarget::kAvx512;
    return tuning_from_env("MAMBA_WEIGHT_PREFETCH", "on", "off",
                           {!zen4, zen4 ? "detected: AMD family 19h with AVX-512" : "detected"});
  }();
  return p;
}

/// avx512_batch_tile()'s choice: off (4x6) on AMD family 1Ah and later (full-width 512-bit units).
Tuning& batch_tile_choice() {
  static Tuning p = [] {
    const unsigned family = amd_family();
    const bool full_width = family >= 0x1A;
    return tuning_from_env("MAMBA_BATCH_TILE", "8x3", "4x6",
                           {!full_width, full_width ? fmt::format("detected: AMD family {:X}h", family) : "detected"});
  }();
  return p;
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

bool weight_prefetch() { return prefetch_choice().on; }

std::string weight_prefetch_description() {
  const Tuning& p = prefetch_choice();
  return fmt::format("{} ({})", p.on ? "on" : "off", p.why);
}

void set_weight_prefetch_for_test(bool on) { prefetch_choice() = {on, "set by set_weight_prefetch_for_test"}; }

bool avx512_batch_tile() { return batch_tile_choice().on; }

std::string avx512_batch_tile_description() {
  const Tuning& p = batch_tile_choice();
  return fmt::format("{} ({})", p.on ? "8x3" : "4x6", p.why);
}

void set_avx512_batch_tile_for_test(bool on) { batch_tile_choice() = {on, "set by set_avx512_batch_tile_for_test"}; }

std::string cpu_dispatch_description() {
  std::string target = cpu_target_description();  // its warning (if any) first
  std::string prefetch = weight_prefetch_description();
  std::string tile = avx512_batch_tile_description();  // read on every target, so a bad value is warned about
  if (cpu_target() != CpuTarget::kAvx512) return fmt::format("{}, weight prefetch {}", target, prefetch);
  return fmt::format("{}, weight prefetch {}, batch tile {}", target, prefetch, tile);
}

std::int64_t cpu_l2_cache_bytes() {
  static const std::int64_t bytes = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<std::int64_t>(v) : std::int64_t{0};
  }();
  return bytes;
}

}  // namespace mamba::ops::cpu
