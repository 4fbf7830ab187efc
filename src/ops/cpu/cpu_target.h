// Which SIMD code path (dispatch target) the CPU kernels use, chosen once at run time.
//
// Shipped builds compile for baseline x86-64; kernels that need wider instructions live in their own
// translation units named `*_avx2.cc` / `*_avx512.cc`, which CMake compiles with the matching -m
// flags (see CMakeLists.txt). Such a file must only be entered after cpu_target() said its target is
// usable, and must not define non-inline-namespace templates/inline functions that other files also
// instantiate (keep its helpers in an anonymous namespace), or the linker could hand AVX code to
// baseline callers.
//
// Targets (each implies the previous):
//   kBaseline  any x86-64 (SSE2); slow portable loops; linear and quantized linear bitwise the same
//              as the others, scan/SSD/conv/norm within the parity tests' tolerance (other roundings)
//   kAvx2      AVX2 + FMA + F16C (Haswell / Zen 1 and later)
//   kAvx512    AVX-512 F/BW/VL/DQ (Skylake-SP / Zen 4 and later); cpu_has_avx512_bf16/_vnni say
//              whether the BF16 / VNNI extensions are there too
//
// Override: the environment variable MAMBA_CPU_TARGET=baseline|avx2|avx512 (read once, at the first
// call) forces a target; asking for one the CPU lacks prints a warning to stderr and uses the best
// supported one instead. Tests force each target with set_cpu_target_for_test().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mamba::ops::cpu {

enum class CpuTarget { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

/// The target every dispatched kernel uses now (detected, or forced as described above).
CpuTarget cpu_target();
/// The target in use and why, for a log line at model load: "avx2 (detected; AVX-512 not available)",
/// "baseline (forced by MAMBA_CPU_TARGET)", "avx2 (detected; AVX-512 not available; MAMBA_CPU_TARGET=x
/// ignored: not one of baseline|avx2|avx512)". Like cpu_target(), the first call reads the variable
/// (and prints its warning, if any).
std::string cpu_target_description();
/// Targets this CPU can run, ascending (always contains kBaseline).
std::vector<CpuTarget> supported_cpu_targets();
/// "baseline", "avx2", "avx512".
const char* cpu_target_name(CpuTarget t);
/// Forces `t` (must be in supported_cpu_targets()); for parity tests and benches. Not thread-safe
/// with concurrently running kernels.
void set_cpu_target_for_test(CpuTarget t);
/// AVX-512 extensions (false when the target is below kAvx512 or the CPU lacks them).
bool cpu_has_avx512_bf16();
bool cpu_has_avx512_vnni();
/// One core's L2 cache in bytes as the CPU reports it (sysconf(_SC_LEVEL2_CACHE_SIZE), i.e. cpuid;
/// read once); 0 when unknown. For sizing the blocks the kernels keep in L2.
std::int64_t cpu_l2_cache_bytes();

}  // namespace mamba::ops::cpu
