// The bf16 precision tier of ops::linear (bf16_dot.h): packing, the scalar reference, the
// dispatcher, and ops::pack_weight_bf16_to.

#include "ops/cpu/bf16_dot.h"

#include <algorithm>
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/cpu/cpu_target.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ops.h"

namespace mamba::ops {
namespace cpu::bf16dot {

std::int64_t packed_bytes(std::int64_t N, std::int64_t K) {
  return (N + kBlockRows - 1) / kBlockRows * pairs(K) * 64;
}

void pack(const TensorView& W, std::uint8_t* out) {
  const std::int64_t N = W.shape[0], K = W.shape[1], Kp = pairs(K);
  const std::int64_t blocks = (N + kBlockRows - 1) / kBlockRows;
  parallel_for(blocks, blocks * K >= kParallelMinWork, [&](std::int64_t b0, std::int64_t b1) {
    std::vector<float> row(static_cast<std::size_t>(K));
    for (std::int64_t b = b0; b < b1; ++b) {
      std::uint8_t* blk = out + b * Kp * 64;
      for (int n = 0; n < kBlockRows; ++n) {
        const std::int64_t r = b * kBlockRows + n;
        auto* lane = reinterpret_cast<std::uint16_t*>(blk + 4 * n);  // + 32·p: vector p's pair
        if (r >= N) {
          for (std::int64_t p = 0; p < Kp; ++p) lane[32 * p] = lane[32 * p + 1] = 0;
          continue;
        }
        if (W.dtype == DType::kBF16) {
          const auto* src = static_cast<const std::uint16_t*>(W.data) + r * K;
          for (std::int64_t k = 0; k < K; ++k) lane[32 * (k / 2) + k % 2] = src[k];
        } else {
          convert_to_f32(static_cast<const std::uint8_t*>(W.data) + dtype_bytes(W.dtype, std::size_t(r * K)), W.dtype,
                         std::size_t(K), row.data());
          for (std::int64_t k = 0; k < K; ++k) lane[32 * (k / 2) + k % 2] = to_bf16(row[std::size_t(k)]);
        }
        if (K % 2 == 1) lane[32 * (Kp - 1) + 1] = 0;
      }
    }
  });
}

void round_rows(const float* x, std::int64_t ldx, std::int64_t M, std::int64_t K, std::uint32_t* xb) {
  const std::int64_t Kp = pairs(K);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t p = 0; p < Kp; ++p) {
      const std::uint32_t lo = to_bf16(x[m * ldx + 2 * p]);
      const std::uint32_t hi = 2 * p + 1 < K ? to_bf16(x[m * ldx + 2 * p + 1]) : 0;
      xb[m * Kp + p] = lo | hi << 16;
    }
}

namespace {

/// bf16 bits → fp32 with denormals as zero (VDPBF16PS's DAZ).
inline float daz(std::uint32_t h) {
  const float v = bf16_to_f32(static_cast<std::uint16_t>(h));
  return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v;
}
/// VDPBF16PS's FTZ on a result.
inline float ftz(float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; }

}  // namespace

void dot_blocks_ref(const Args& a, std::int64_t m0, std::int64_t m1, std::int64_t b0, std::int64_t b1) {
  const std::int64_t Kp = pairs(a.K);
  for (std::int64_t b = b0; b < b1; ++b) {
    const std::uint8_t* blk = a.wp + b * Kp * 64;
    for (int n = 0; n < kBlockRows && b * kBlockRows + n < a.N; ++n) {
      for (std::int64_t m = m0; m < m1; ++m) {
        const std::uint32_t* xb = a.xb + m * Kp;
        float r = 0.0f;
        for (std::int64_t p = 0; p < Kp; ++p) {
          std::uint32_t w;
          std::memcpy(&w, blk + 64 * p + 4 * n, 4);
          r = ftz(std::fma(daz(w >> 16), daz(xb[p] >> 16), r));
          r = ftz(std::fma(daz(w & 0xFFFF), daz(xb[p] & 0xFFFF), r));
        }
        a.y[m * a.ldy + b * kBlockRows + n] = a.bias != nullptr ? r + a.bias[b * kBlockRows + n] : r;
      }
    }
  }
}

bool kernels_available() { return cpu_target() >= CpuTarget::kAvx512 && cpu_has_avx512_bf16(); }

void linear(const float* x, std::int64_t ldx, std::int64_t M, const TensorView& W, const float* bias, float* y,
            std::int64_t ldy, bool softplus, const ConvSiluEpilogue* conv) {
  const std::int64_t N = W.shape[0], K = W.shape[1], Kp = pairs(K);
  if (M <= 0 || N <= 0) return;
  static thread_local std::vector<std::uint32_t> xb_buf;
  if (xb_buf.size() < static_cast<std::size_t>(M * Kp)) xb_buf.resize(static_cast<std::size_t>(M * Kp));
  std::uint32_t* xb = xb_buf.data();
  const bool simd = kernels_available();
  parallel_for(M, M >= 16 && M * K >= kParallelMinWork / 8, [&](std::int64_t m0, std::int64_t m1) {
    if (simd) round_rows_avx512bf16(x + m0 * ldx, ldx, m1 - m0, K, xb + m0 * Kp);
    else round_rows(x + m0 * ldx, ldx, m1 - m0, K, xb + m0 * Kp);
  });
  const Args args{xb, M, K, N, static_cast<const std::uint8_t*>(W.packed), bias, y, ldy, softplus, conv};
  auto* kernel = simd ? &dot_blocks_avx512bf16 : &dot_blocks_ref;
  // (dot_blocks_ref has no epilogues: ops::linear_softplus and linear_conv_silu ask only where they run)
  assert(!softplus || simd);
  assert(conv == nullptr || (simd && conv->K == 4 && !softplus));
  const std::int64_t n_blocks = (N + kBlockRows - 1) / kBlockRows;
  // Threads take contiguous block ranges, all M rows each (each weight block is read once). With
  // more than kDecodeRows rows (a prefill, or a piece of one), a weight of few blocks (x_proj: N =
  // 80, 5 blocks) is shared by row ranges instead (its blocks read by every thread, from cache),
  // where a block split would give one thread 3 blocks of 5. Up to kDecodeRows rows (decode
  // batches, short pieces) keep the block split: there the weights come from memory, and each
  // thread reading all of them cost more than the uneven split (mamba-130m bf16, Zen 5, 2 threads,
  // x_proj per step: b=8 0.37–0.46 → 0.31–0.32 ms, b=2 0.26 → 0.20, b=4 0.29 → 0.23; with warm
  // weights the row split had been ahead, 7.3 → 6.0 µs a call at b=8).
  const bool parallel = M * N * K >= kParallelMinWork;
  // (The conv epilogue runs down all rows of a block in one thread: never a row split.)
  if (conv == nullptr && M > kDecodeRows && n_blocks < 4 * std::int64_t(num_threads())) {
    parallel_for(M, parallel, [&](std::int64_t m0, std::int64_t m1) {
      kernel(args, m0, m1, 0, n_blocks);
    });
    return;
  }
  // Several rows (prefill, batched decode): parallel_for_balanced (prefill 512 balanced / static:
  // mamba-130m 2397 / 2323 tok/s, mamba2-130m 2411 / 2341; b=8 decode 1005 / 950 with one core slow,
  // 976 / 973 without). In grains of the tile's blocks (kDecodeStreams up to kDecodeRows rows, else
  // kPrefillBlocks), so that the owner's last claims and every block another thread takes over run
  // in a full tile instead of single-block tiles (one accumulator chain per output; they had ~12%
  // of the kernel's perf samples in a mamba-130m b=8 decode, ~10% in a mamba2-130m prefill).
  // One row keeps the static split: its kernel reads a thread's range as several streams that
  // small grains would bring next to each other (balanced in grains of 3 or 12 blocks: within the
  // noise).
  const auto run = [&](std::int64_t b0, std::int64_t b1) { kernel(args, 0, M, b0, b1); };
  if (M >= 2) parallel_for_balanced(n_blocks, M <= kDecodeRows ? kDecodeStreams : kPrefillBlocks, parallel && n_blocks > 1, run);
  else parallel_for(n_blocks, parallel && n_blocks > 1, run);
}

}  // namespace cpu::bf16dot

bool bf16_tier_available() { return cpu::bf16dot::kernels_available(); }

std::int64_t pack_weight_bf16_bytes(const TensorView& W) {
  if (W.dtype != DType::kF32 && W.dtype != DType::kBF16 && W.dtype != DType::kF16) return 0;
  return cpu::bf16dot::packed_bytes(W.shape[0], W.shape[1]);
}

void pack_weight_bf16_to(TensorView& W, void* dst) {
  auto* out = static_cast<std::uint8_t*>(dst);
  cpu::bf16dot::pack(W, out);
  W.packed = out;
}

}  // namespace mamba::ops
