// Linear and embedding over q8 / q4 weights: the dispatcher, the scalar reference (= the baseline
// target) and the embedding lookup. The computation is defined in quant_kernels.h.
//
// AVX-512 VNNI: the blocked kernels over W.packed (linear_blocked; threads take ranges of 16-row
// blocks in decode, (3 blocks, 64 input rows) tasks in prefill). Otherwise the row-major kernels:
// Work split: one input row (decode): a contiguous range of weight rows per thread. Else tasks =
// (blocks of kRowsPerTask weight rows) × (blocks of kMPerTask input rows);
// within a task each weight row's codes are read from memory once and reused from L1 for every
// input row of the block, so decode (M ≤ 64) streams the weights once per call and prefill keeps a
// weight block in cache while its input rows pass. Threads take whole tasks (parallel_for, static).
// From kTileMinRows input rows on, a task's weight rows are unpacked once into lanes-are-rows
// vectors (dot_tiles_avx2) that every input row of the task then reads.

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_target.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/quant_kernels.h"
#include "ops/cpu/quantized.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ops.h"

namespace mamba::ops::cpu {
namespace quant {

void quantize_row_ref(const float* x, std::int64_t K, std::int8_t* xq, std::int8_t* xl, float* sx) {
  for (std::int64_t g = 0; g < K / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < kGroup; ++i) {
      const float a = std::fabs(xg[i]);
      finite = finite && a <= FLT_MAX;
      amax = std::max(amax, a);
    }
    if (!finite) {
      for (int i = 0; i < kGroup; ++i) xq[g * kGroup + i] = xl[g * kGroup + i] = 0;
      sx[g] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const float s = amax / 127.0f;
    const float inv = activation_inverse(amax);
    const float inv256 = inv * 256.0f;
    sx[g] = s * (1.0f / 256.0f);
    for (int i = 0; i < kGroup; ++i) {
      const float qh = std::nearbyint(xg[i] * inv);
      const float r = std::fma(-qh, s, xg[i]);
      const float ql = std::clamp(std::nearbyint(r * inv256), -127.0f, 127.0f);
      xq[g * kGroup + i] = static_cast<std::int8_t>(qh);
      xl[g * kGroup + i] = static_cast<std::int8_t>(ql);
    }
  }
}

void pack_rows(const std::int8_t* xq, const std::int8_t* xl, std::int64_t M, std::int64_t K, bool q4, std::int16_t* x16,
               std::int16_t* x16n, std::int32_t* xsum) {
  const std::int64_t G = K / kGroup;
  for (std::int64_t m = 0; m < M; ++m) {
    const std::int8_t* qh = xq + m * K;
    const std::int8_t* ql = xl + m * K;
    auto X16 = [&](std::int64_t k) { return static_cast<std::int16_t>(256 * qh[k] + ql[k]); };
    if (xsum != nullptr)
      for (std::int64_t g = 0; g < G; ++g) {
        std::int32_t sum = 0;
        for (int i = 0; i < kGroup; ++i) sum += X16(g * kGroup + i);
        xsum[m * G + g] = sum;
      }
    if (!q4) {
      for (std::int64_t k = 0; k < K; ++k) x16[m * K + k] = X16(k);
      continue;
    }
    std::int16_t* out = x16n + m * K;
    for (std::int64_t g = 0; g < G; g += 2) {
      std::int16_t* o = out + g * kGroup;
      if (g + 1 < G) {  // a pair: A_j[i] = X16 of group g + i / 8 at 4·(i % 8) + j
        for (int j = 0; j < 4; ++j)
          for (int i = 0; i < 16; ++i) o[16 * j + i] = X16((g + i / 8) * kGroup + 4 * (i % 8) + j);
      } else {  // the last group alone: A_j[i] = X16 at 4i + j
        for (int j = 0; j < 4; ++j)
          for (int i = 0; i < 8; ++i) o[8 * j + i] = X16(g * kGroup + 4 * i + j);
      }
    }
  }
}

namespace {

/// Codes of group g of a weight row as int8 values in k order.
inline void unpack_group(const void* w, bool q4, std::int64_t g, std::int8_t* out) {
  if (!q4) {
    const auto* p = static_cast<const std::int8_t*>(w) + g * kGroup;
    for (int i = 0; i < kGroup; ++i) out[i] = p[i];
    return;
  }
  const auto* p = static_cast<const std::uint8_t*>(w) + g * kGroup / 2;
  for (int j = 0; j < kGroup / 2; ++j) {
    out[2 * j] = static_cast<std::int8_t>((p[j] & 0x0F) - 8);
    out[2 * j + 1] = static_cast<std::int8_t>((p[j] >> 4) - 8);
  }
}

/// The fixed order both reference dots sum their group terms in (quant_kernels.h): group g of the
/// first G − G % 8 into lane g % 8 (acc = term(g, acc)), the lanes by the tree l[i] += l[i + s] for s
/// = 4, 2, 1, then the tail groups in order onto the result.
template <class Term>
float combine_groups(std::int64_t G, Term term) {
  const std::int64_t G8 = G - G % 8;
  float l[8] = {};
  for (std::int64_t g = 0; g < G8; ++g) l[g % 8] = term(g, l[g % 8]);
  for (int s = 4; s >= 1; s /= 2)
    for (int i = 0; i < s; ++i) l[i] = l[i] + l[i + s];
  float r = l[0];
  for (std::int64_t g = G8; g < G; ++g) r = term(g, r);
  return r;
}

}  // namespace

float dot_ref(const std::int8_t* xq, const std::int8_t* xl, const float* sx, const void* w, const float* sw, std::int64_t K, bool q4) {
  return combine_groups(K / kGroup, [&](std::int64_t g, float acc) {
    std::int8_t wq[kGroup];
    unpack_group(w, q4, g, wq);
    std::int32_t hi = 0, lo = 0;
    for (int i = 0; i < kGroup; ++i) {
      hi += std::int32_t{xq[g * kGroup + i]} * std::int32_t{wq[i]};
      lo += std::int32_t{xl[g * kGroup + i]} * std::int32_t{wq[i]};
    }
    const std::int32_t isum = hi * 256 + lo;
    return std::fma(sx[g] * sw[g], static_cast<float>(isum), acc);
  });
}

void quantize_row_a8_ref(const float* x, std::int64_t K, std::int8_t* c, float* s, float* o) {
  for (std::int64_t g = 0; g < K / kGroup; ++g) {
    const float* xg = x + g * kGroup;
    float lo = xg[0], hi = xg[0];
    bool finite = true;
    for (int i = 0; i < kGroup; ++i) {
      finite = finite && std::fabs(xg[i]) <= FLT_MAX;
      lo = std::min(lo, xg[i]);
      hi = std::max(hi, xg[i]);
    }
    lo += 0.0f;  // −0 → +0, as the vector form
    std::int8_t* cg = c + g * kGroup;
    if (!finite) {
      std::fill(cg, cg + kGroup, std::int8_t{0});
      s[g] = o[g] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    float sg = hi / 255.0f - lo / 255.0f;
    if (!(sg >= FLT_MIN)) {  // a constant group, or a spread below 255·FLT_MIN (~3e-36): codes −128
      sg = 0.0f;
      std::fill(cg, cg + kGroup, std::int8_t{-128});
    } else {
      // (x/2 − lo/2)·(2/s): x − lo itself overflows for a spread above FLT_MAX.
      const float inv2 = 2.0f * (1.0f / sg), lo_half = lo * 0.5f;
      for (int i = 0; i < kGroup; ++i)
        cg[i] = static_cast<std::int8_t>(static_cast<int>(std::nearbyint(std::min((xg[i] * 0.5f - lo_half) * inv2, 255.0f))) - 128);
    }
    s[g] = sg;
    o[g] = std::fma(128.0f, sg, lo);  // one rounding (lo + 128·s unfused overflows for a spread near FLT_MAX)
  }
}

float dot_a8_ref(const std::int8_t* c, const float* s, const float* o, const void* w, const float* sw, const float* T,
                 std::int64_t K, bool q4) {
  return combine_groups(K / kGroup, [&](std::int64_t g, float acc) {
    std::int8_t wq[kGroup];
    unpack_group(w, q4, g, wq);
    std::int32_t isum = 0;
    for (int i = 0; i < kGroup; ++i) isum += std::int32_t{c[g * kGroup + i]} * std::int32_t{wq[i]};
    return std::fma(o[g], T[g], std::fma(s[g] * sw[g], static_cast<float>(isum), acc));
  });
}

void a8_sums_rows(const void* w, const float* sw, std::int64_t N, std::int64_t K, bool q4, float* out) {
  const std::int64_t G = K / kGroup, row_bytes = q4 ? K / 2 : K;
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t g = 0; g < G; ++g) {
      std::int8_t wq[kGroup];
      unpack_group(static_cast<const std::uint8_t*>(w) + n * row_bytes, q4, g, wq);
      std::int32_t S = 0;
      for (int i = 0; i < kGroup; ++i) S += wq[i];
      out[n * G + g] = sw[n * G + g] * static_cast<float>(S);
    }
}

std::int64_t a8_sums_bytes(std::int64_t N, std::int64_t K) {
  return (N + kBlockRows - 1) / kBlockRows * (K / kGroup) * kBlockRows * std::int64_t{sizeof(float)};
}

void pack_a8_sums(const void* w, const float* sw, std::int64_t N, std::int64_t K, bool q4, float* out) {
  const std::int64_t G = K / kGroup, blocks = (N + kBlockRows - 1) / kBlockRows, row_bytes = q4 ? K / 2 : K;
  // Blocks are independent: all threads (load time of a large model).
  parallel_for(blocks, blocks * K >= kParallelMinWork, [&](std::int64_t b0, std::int64_t b1) {
    std::vector<float> row(static_cast<std::size_t>(G));
    std::fill(out + b0 * G * kBlockRows, out + b1 * G * kBlockRows, 0.0f);  // padding rows stay 0
    for (std::int64_t n = b0 * kBlockRows; n < std::min(N, b1 * kBlockRows); ++n) {
      a8_sums_rows(static_cast<const std::uint8_t*>(w) + n * row_bytes, sw + n * G, 1, K, q4, row.data());
      for (std::int64_t g = 0; g < G; ++g) out[(n / kBlockRows * G + g) * kBlockRows + n % kBlockRows] = row[std::size_t(g)];
    }
  });
}

void dot_rows_baseline(const DotArgs& a, std::int64_t m0, std::int64_t m1, std::int64_t n0, std::int64_t n1) {
  const std::int64_t G = a.K / kGroup;
  const std::int64_t row_bytes = a.q4 ? a.K / 2 : a.K;
  for (std::int64_t n = n0; n < n1; ++n) {
    const void* wn = static_cast<const std::uint8_t*>(a.w) + n * row_bytes;
    for (std::int64_t m = m0; m < m1; ++m)
      a.y[m * a.ldy + n] = dot_ref(a.xq + m * a.K, a.xl + m * a.K, a.sx + m * G, wn, a.sw + n * G, a.K, a.q4);
  }
}

}  // namespace quant

namespace {

constexpr std::int64_t kRowsPerTask = 16;
constexpr std::int64_t kMPerTask = 64;
/// Input rows from which the AVX2 target runs dot_tiles_avx2, whose weight unpacking (~0.4
/// instructions per weight and call) pays off from here on (Zen 4 under MAMBA_CPU_TARGET=avx2,
/// 768 × 3072 q8, 2 threads, G MAC/s rows / tiles: M = 4 68 / 62, 5 69 / 67, 6 68 / 77, 8 68 / 84).
constexpr std::int64_t kTileMinRows = 6;

float bias_at(const TensorView& b, std::int64_t n) {
  switch (b.dtype) {
    case DType::kF32: return static_cast<const float*>(b.data)[n];
    case DType::kBF16: return bf16_to_f32(static_cast<const std::uint16_t*>(b.data)[n]);
    case DType::kF16: return f16_to_f32(static_cast<const std::uint16_t*>(b.data)[n]);
    default: return 0.0f;
  }
}


/// linear_quantized on the blocked kernels (quant_kernels.h §Blocked weights): W.packed, or W
/// packed into scratch when it has no packed copy (a caller that did not run ops::pack_weight_to).
/// Per-call scratch of the calling thread (buffers only grow): the activation codes and what the
/// kernels derive from them, a packed weight (linear_blocked without W.packed), the bias in fp32.
struct Scratch {
  std::vector<std::int8_t> xq, xl;
  std::vector<float> sx, bias;
  std::vector<std::int16_t> x16;
  std::vector<std::int32_t> xsum, corr;
  std::vector<std::uint8_t> pack;
  std::vector<float> off;
};
Scratch& scratch() {
  static thread_local Scratch s;
  return s;
}
/// v's data, v grown to at least n elements.
template <class T>
T* grow(std::vector<T>& v, std::int64_t n) {
  if (v.size() < static_cast<std::size_t>(n)) v.resize(static_cast<std::size_t>(n));
  return v.data();
}

void linear_blocked(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias, float* y,
                    std::int64_t ldy) {
  const std::int64_t N = W.shape[0], K = W.shape[1], G = K / quant::kGroup;
  const bool q4 = W.dtype == DType::kQ4;
  Scratch& s = scratch();
  std::int8_t* xq = grow(s.xq, M * K);
  std::int8_t* xl = grow(s.xl, M * K);
  float* sx = grow(s.sx, M * G);
  std::int32_t* corr = grow(s.corr, M * G);
  const std::int32_t offset = q4 ? 8 : 128;  // u = q + 8 (q4), q + 128 (q8)
  const bool a8 = W.int8_tier && W.packed != nullptr;
  float* off = a8 ? grow(s.off, M * G) : nullptr;
  // 1. Activation quantization, and the offset correction offset · Σ_g X16 (int8 tier: Σ_g c) per group.
  cpu::parallel_for(M, M >= 16 && M * K >= kParallelMinWork / 8, [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) {
      if (a8) {
        quant::quantize_rows_a8_avx512(x + m * ldx, ldx, 1, K, xq + m * K, sx + m * G, off + m * G, corr + m * G);
        for (std::int64_t g = 0; g < G; ++g) corr[m * G + g] *= offset;
        continue;
      }
      quant::quantize_rows_avx512(x + m * ldx, ldx, 1, K, xq + m * K, xl + m * K, sx + m * G, corr + m * G);
      for (std::int64_t g = 0; g < G; ++g) corr[m * G + g] *= offset;
    }
  });
  const auto* wp = static_cast<const std::uint8_t*>(W.packed);
  if (wp == nullptr) {
    std::uint8_t* buf = grow(s.pack, quant::blocked_bytes(N, K, q4));
    quant::pack_blocked(W.data, static_cast<const float*>(W.scales), N, K, q4, buf);
    wp = buf;
  }
  // The int8 tier's T sums follow the blocked codes in W.packed (ops::pack_weight_int8_to).
  const float* sums = a8 ? reinterpret_cast<const float*>(wp + quant::blocked_bytes(N, K, q4)) : nullptr;
  // The bias in fp32 (as stored when F32, else converted into scratch); the kernel adds it.
  const float* bias32 = nullptr;
  if (!bias.empty() && bias.dtype == DType::kF32) {
    bias32 = static_cast<const float*>(bias.data);
  } else if (!bias.empty()) {
    float* b = grow(s.bias, N);
    for (std::int64_t n = 0; n < N; ++n) b[n] = bias_at(bias, n);
    bias32 = b;
  }
  const quant::BlockedArgs args{xq, xl, sx, corr, M, K, N, wp, q4, bias32, y, ldy, off, sums};
  const std::int64_t n_blocks = (N + quant::kBlockRows - 1) / quant::kBlockRows;
  if (M == 1) {
    // Decode: one contiguous range of blocks per thread (the kernel reads it as two streams). A
    // weight under 2 · kParallelMinWork elements (x_proj of the 130m–370m Mamba-1 models: 123–197 K;
    // 77–197 KB of q4/q8 codes) runs on the calling thread: its codes stream in ~2 µs there, about
    // what a two-thread region costs to start, end and hand the activation codes across (Zen 4 VM,
    // mamba-130m x_proj q4: 2.3 µs on one thread, 2.5 / 7 µs on two as the host placed the vCPUs;
    // b=1 decode, 8 interleaved rounds: q4 434 → 446 tok/s, q8 288 → 301, medians).
    const bool par = N * K >= 2 * kParallelMinWork && n_blocks >= 4;
    cpu::parallel_for(n_blocks, par, [&](std::int64_t b0, std::int64_t b1) { quant::dot_blocked_avx512vnni(args, 0, 1, b0, b1); });
    return;
  }
  // Tasks: (kPrefillTileBlocks weight blocks, kMPerTask input rows).
  constexpr std::int64_t kBPerTask = quant::kPrefillTileBlocks;
  const std::int64_t b_tasks = (n_blocks + kBPerTask - 1) / kBPerTask;
  const std::int64_t m_blocks = (M + kMPerTask - 1) / kMPerTask, n_tasks = b_tasks * m_blocks;
  const bool parallel = M * N * K >= kParallelMinWork && n_tasks > 1;
  cpu::parallel_for(n_tasks, parallel, [&](std::int64_t t0, std::int64_t t1) {
    // Up to kMPerTask rows: the thread's blocks in one call, so the kernel can prefetch the next
    // blocks while it computes (it does for decode batches of ≤ 16 rows).
    if (m_blocks == 1) {
      quant::dot_blocked_avx512vnni(args, 0, M, t0 * kBPerTask, std::min(n_blocks, t1 * kBPerTask));
      return;
    }
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t b = t % b_tasks * kBPerTask, m0 = t / b_tasks * kMPerTask, m1 = std::min(M, m0 + kMPerTask);
      quant::dot_blocked_avx512vnni(args, m0, m1, b, std::min(n_blocks, b + kBPerTask));
    }
  });
}

/// The int8 tier where the blocked kernels do not run (a target forced below AVX-512 VNNI after
/// the weights were packed): the scalar reference of the same bits (quant_kernels.h), one (row,
/// output) at a time.
void linear_int8_ref(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias, float* y,
                     std::int64_t ldy) {
  const std::int64_t N = W.shape[0], K = W.shape[1], G = K / quant::kGroup;
  const bool q4 = W.dtype == DType::kQ4;
  const std::int64_t row_bytes = q4 ? K / 2 : K;
  const auto* sw = static_cast<const float*>(W.scales);
  std::vector<std::int8_t> c(static_cast<std::size_t>(K));
  std::vector<float> sc(static_cast<std::size_t>(G)), off(static_cast<std::size_t>(G)), T(static_cast<std::size_t>(N * G));
  quant::a8_sums_rows(W.data, sw, N, K, q4, T.data());
  for (std::int64_t m = 0; m < M; ++m) {
    quant::quantize_row_a8_ref(x + m * ldx, K, c.data(), sc.data(), off.data());
    for (std::int64_t n = 0; n < N; ++n) {
      const void* wn = static_cast<const std::uint8_t*>(W.data) + n * row_bytes;
      const float r = quant::dot_a8_ref(c.data(), sc.data(), off.data(), wn, sw + n * G, T.data() + n * G, K, q4);
      y[m * ldy + n] = bias.empty() ? r : r + bias_at(bias, n);
    }
  }
}

}  // namespace

namespace quant {
bool blocked_kernels_active() { return cpu_target() >= CpuTarget::kAvx512 && cpu_has_avx512_vnni(); }
}  // namespace quant

void linear_quantized(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const TensorView& bias, float* y,
                      std::int64_t ldy) {
  const std::int64_t N = W.shape[0], K = W.shape[1], G = K / quant::kGroup;
  if (M <= 0 || N <= 0) return;
  if (quant::blocked_kernels_active()) return linear_blocked(x, ldx, M, W, bias, y, ldy);
  if (W.int8_tier && W.packed != nullptr) return linear_int8_ref(x, ldx, M, W, bias, y, ldy);
  const CpuTarget target = cpu_target();
  // 1. Activation quantization (and, for the SIMD kernels, its packed layouts) into per-call
  // scratch of the calling thread (grows only).
  const bool q4 = W.dtype == DType::kQ4;
  Scratch& s = scratch();
  std::int8_t* xq = grow(s.xq, M * K);
  std::int8_t* xl = grow(s.xl, M * K);
  float* sx = grow(s.sx, M * G);
  const bool simd = target >= CpuTarget::kAvx2;
  // Several rows: the tile kernel (x16 in k order for q4 as well); fewer: the row-major kernel
  // (x16 for q8, x16n and xsum for q4).
  const bool tiles = simd && M >= kTileMinRows;
  const bool nibble_order = q4 && !tiles;
  std::int16_t* x16 = simd ? grow(s.x16, M * K) : nullptr;
  std::int32_t* xsum = simd && nibble_order ? grow(s.xsum, M * G) : nullptr;  // read by the q4 row kernel only
  // Rows are independent: many rows (prefill) are quantized by all threads (else this serial part
  // caps the prefill's thread scaling).
  cpu::parallel_for(M, M >= 16 && M * K >= kParallelMinWork / 8, [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) {
      if (simd) {
        quant::quantize_rows_avx2(x + m * ldx, ldx, 1, K, xq + m * K, xl + m * K, sx + m * G);
        quant::pack_rows(xq + m * K, xl + m * K, 1, K, nibble_order, nibble_order ? nullptr : x16 + m * K,
                         nibble_order ? x16 + m * K : nullptr, xsum != nullptr ? xsum + m * G : nullptr);
      } else {
        quant::quantize_row_ref(x + m * ldx, K, xq + m * K, xl + m * K, sx + m * G);
      }
    }
  });
  const quant::PackedX px{simd && !nibble_order ? x16 : nullptr, nibble_order ? x16 : nullptr, xsum, xq, xl};
  // 2–4. Integer dot products and the fixed-order fp32 combination, threads over tasks.
  const quant::DotArgs args{xq, xl, sx, px, M, K, W.data, static_cast<const float*>(W.scales), q4, y, ldy};
  auto* kernel = tiles ? &quant::dot_tiles_avx2 : simd ? &quant::dot_rows_avx2 : &quant::dot_rows_baseline;
  if (M == 1) {
    // Decode: one contiguous range of weight rows per thread (the kernel reads it as three streams).
    const bool par = N * K >= kParallelMinWork && N >= 2 * kRowsPerTask;
    cpu::parallel_for(N, par, [&](std::int64_t n0, std::int64_t n1) {
      kernel(args, 0, 1, n0, n1);
      if (!bias.empty())
        for (std::int64_t n = n0; n < n1; ++n) y[n] += bias_at(bias, n);
    });
    return;
  }
  const std::int64_t n_blocks = (N + kRowsPerTask - 1) / kRowsPerTask, m_blocks = (M + kMPerTask - 1) / kMPerTask;
  const std::int64_t n_tasks = n_blocks * m_blocks;
  const bool parallel = M * N * K >= kParallelMinWork && n_tasks > 1;
  cpu::parallel_for(n_tasks, parallel, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const std::int64_t nb = t % n_blocks, mb = t / n_blocks;
      const std::int64_t n0 = nb * kRowsPerTask, n1 = std::min(N, n0 + kRowsPerTask);
      const std::int64_t m0 = mb * kMPerTask, m1 = std::min(M, m0 + kMPerTask);
      kernel(args, m0, m1, n0, n1);
      // 5. Bias.
      if (!bias.empty())
        for (std::int64_t m = m0; m < m1; ++m)
          for (std::int64_t n = n0; n < n1; ++n) y[m * ldy + n] += bias_at(bias, n);
    }
  });
}

void embedding_quantized(const TensorView& table, std::span<const std::int32_t> ids, float* out) {
  const std::int64_t d = table.shape[1], G = d / quant::kGroup;
  const bool q4 = table.dtype == DType::kQ4;
  const std::int64_t row_bytes = q4 ? d / 2 : d;
  const auto* scales = static_cast<const float*>(table.scales);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const std::int64_t id = ids[i];
    const void* w = static_cast<const std::uint8_t*>(table.data) + id * row_bytes;
    float* o = out + static_cast<std::int64_t>(i) * d;
    for (std::int64_t g = 0; g < G; ++g) {
      std::int8_t q[quant::kGroup];
      quant::unpack_group(w, q4, g, q);
      const float s = scales[id * G + g];
      for (int k = 0; k < quant::kGroup; ++k) o[g * quant::kGroup + k] = s * static_cast<float>(q[k]);
    }
  }
}

}  // namespace mamba::ops::cpu
