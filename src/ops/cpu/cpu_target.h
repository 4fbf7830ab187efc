// Which SIMD code path (dispatch target) the CPU kernels use, chosen once at run time.
//
// Shipped builds compile for baseline x86-64; kernels that need wider instructions live in their own
// translation units named `*_avx2.cc` / `*_avx512.cc` / `*_avx512vnni.cc` / `*_avx512bf16.cc`,
// which CMake compiles with the matching -m flags (see CMakeLists.txt). Such a file must only be entered after cpu_target() said its target is
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
/// Whether the decode kernels issue software prefetches ahead of the weight streams they read once
/// per call: one input row against long weight rows (K ≥ 256: in_proj, x_proj, out_proj, lm_head of
/// a batch-1 decode step) in the fp32/bf16/f16, bf16-tier and quantized kernels, and the bf16 tier's
/// decode batches of ≤ 8 rows. (The fp32/bf16/f16 tiles of short rows — dt_proj, K = dt_rank — and
/// of small batches keep their prefetch of the next row group: not measured apart.)
/// Chosen once from the CPU: off on AMD family 19h with AVX-512 (Zen 4), whose hardware prefetchers
/// alone keep those streams nearer the bandwidth — measured on an EPYC 9004 (Genoa) VM, 2 threads,
/// random mamba-130m, median step times of 60 interleaved rounds with / without: q8 7.6 / 5.9 ms,
/// q4 4.3 / 3.7, bf16 12.2 / 10.6, bf16 tier 11.4 / 9.6; on elsewhere (Zen 3 and Zen 5, on which the
/// kernels were tuned with them). The quantized kernels' prefetch of the next blocks during a decode
/// batch's later passes stays on everywhere (it also pays on Zen 4). MAMBA_WEIGHT_PREFETCH=on|off (any case) overrides (read at the first call; any other value is
/// warned about on stderr and ignored). Results are bitwise the same either way: only speed changes.
bool weight_prefetch();
/// "on (detected)", "off (detected: AMD family 19h with AVX-512)", "off (forced by
/// MAMBA_WEIGHT_PREFETCH)", ...: for the log line at load and the bench header.
std::string weight_prefetch_description();
/// Forces weight_prefetch() (benches' A/B runs, tests). Not thread-safe with running kernels.
void set_weight_prefetch_for_test(bool on);
/// Whether the AVX-512 fp32/bf16/f16 kernels (linear_avx512.cc) run 5–64 input rows read straight
/// from memory (decode batches; linear_reads_direct) 8 at a time in a tile of 8 input rows × 3 weight
/// rows ("8x3"), or 4 at a time × 6 weight rows ("4x6", the tile of few rows elsewhere). The 8x3
/// tile widens each bf16/f16 weight vector once per 8 rows instead of once per 4, which pays where
/// the widening competes with the FMAs: AVX-512 on 256-bit units (Zen 4: M = 8, 2 threads,
/// in_proj 137–161 → 170–176 GFLOP/s, mamba-130m bf16 b=8 decode +15–20%). With full-width 512-bit
/// units (Zen 5) the 4x6 tile is ahead: its 4 input rows stay in L1 beside 6 weight rows (the 8x3
/// tile's 8 rows of K = 1536, 48 KiB, are read from L2) and it holds its x vectors without spilling
/// a register: Zen 5 VM, 2 threads, mamba-130m bf16, tok/s 8x3 → 4x6: b=8 744 / 725 → 834 / 836,
/// b=16 765 / 759 → 907 / 890, b=32 752 / 715 → 920 / 911 (out_proj alone at M = 8: 253 → 305
/// GFLOP/s). Chosen once from the CPU: 4x6 on AMD family 1Ah and later, 8x3 elsewhere (Zen 4 measured;
/// Intel cores, whose shuffle and shift ports also issue FMAs, by the Zen 4 reasoning).
/// MAMBA_BATCH_TILE=8x3|4x6 (any case) overrides (read at the first call, or by
/// cpu_dispatch_description() on any target; any other value is warned about on stderr and ignored). Results are bitwise the same either way (both tiles compute the canonical
/// order, linear_canonical.h): only speed changes. Other targets and kernels ignore it.
bool avx512_batch_tile();
/// "8x3 (detected)", "4x6 (detected: AMD family 1Ah)", "4x6 (forced by MAMBA_BATCH_TILE)", ...
std::string avx512_batch_tile_description();
/// Forces avx512_batch_tile() (benches' A/B runs, tests). Not thread-safe with running kernels.
void set_avx512_batch_tile_for_test(bool on);
/// The log line's text: cpu_target_description() + ", weight prefetch " + weight_prefetch_description(),
/// and on the avx512 target + ", batch tile " + avx512_batch_tile_description(), e.g. "avx512
/// (detected; VNNI yes, BF16 yes), weight prefetch off (detected: AMD family 19h with AVX-512), batch
/// tile 8x3 (detected)". Reads the environment variables (and prints their warnings) if not read yet.
std::string cpu_dispatch_description();
/// One core's L2 cache in bytes as the CPU reports it (sysconf(_SC_LEVEL2_CACHE_SIZE), i.e. cpuid;
/// read once); 0 when unknown. For sizing the blocks the kernels keep in L2.
std::int64_t cpu_l2_cache_bytes();

}  // namespace mamba::ops::cpu
