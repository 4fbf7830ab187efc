// The blocked layout of quantized weights (quant_kernels.h §Blocked weights): packing from the
// stored row-major codes, and ops::pack_weight_to, which gives a model its packed copies at load.

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/cpu/cpu_target.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/quant_kernels.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ops.h"

namespace mamba::ops {
namespace cpu::quant {

std::int64_t blocked_bytes(std::int64_t N, std::int64_t K, bool q4) {
  return (N + kBlockRows - 1) / kBlockRows * (K / kGroup) * blocked_chunk_bytes(q4);
}

void pack_blocked(const void* w, const float* sw, std::int64_t N, std::int64_t K, bool q4, std::uint8_t* out) {
  const std::int64_t G = K / kGroup, row_bytes = q4 ? K / 2 : K, chunk = blocked_chunk_bytes(q4);
  const std::int64_t blocks = (N + kBlockRows - 1) / kBlockRows;
  const auto* codes = static_cast<const std::uint8_t*>(w);
  // Blocks are independent: all threads (a 2.8B-parameter q8 model packs ~3 GB at load).
  parallel_for(blocks, blocks * K >= kParallelMinWork, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      for (std::int64_t g = 0; g < G; ++g) {
        std::uint8_t* c = out + (b * G + g) * chunk;
        float* scales = reinterpret_cast<float*>(c + blocked_code_bytes(q4));
        for (int n = 0; n < kBlockRows; ++n) {
          const std::int64_t row = b * kBlockRows + n;
          std::uint8_t* lane = c + 4 * n;  // + 64 · j: vector j's 4 bytes of row n
          if (row >= N) {  // padding: code 0 (u8 128 / nibbles 8) of scale 0
            for (int j = 0; j < (q4 ? 4 : 8); ++j) std::memset(lane + 64 * j, q4 ? 0x88 : 0x80, 4);
            scales[n] = 0.0f;
            continue;
          }
          scales[n] = sw[row * G + g];
          if (!q4) {
            // Vector j (k = 32g + 4j ..): byte 4n + i = q + 128, i.e. the stored byte with its top bit flipped.
            const std::uint8_t* r = codes + row * row_bytes + g * kGroup;
            for (int j = 0; j < 8; ++j) {
              std::uint32_t v;
              std::memcpy(&v, r + 4 * j, 4);
              v ^= 0x80808080u;
              std::memcpy(lane + 64 * j, &v, 4);
            }
          } else {
            // Stored: byte k/2 holds k even in its low nibble. Vector j (k = 32g + 8j ..): byte 4n + i =
            // u(8j + i) | u(8j + 4 + i) << 4.
            const std::uint8_t* r = codes + row * row_bytes + g * kGroup / 2;
            std::uint8_t u[kGroup];
            for (int k = 0; k < kGroup / 2; ++k) {
              u[2 * k] = r[k] & 0x0F;
              u[2 * k + 1] = r[k] >> 4;
            }
            for (int j = 0; j < 4; ++j)
              for (int i = 0; i < 4; ++i) lane[64 * j + i] = static_cast<std::uint8_t>(u[8 * j + i] | u[8 * j + 4 + i] << 4);
          }
        }
      }
    }
  });
}

}  // namespace cpu::quant

std::int64_t pack_weight_bytes(const TensorView& W) {
  const bool q4 = W.dtype == DType::kQ4;
  if ((W.dtype != DType::kQ8 && !q4) || W.scale_dtype != DType::kF32 || W.group_size != cpu::quant::kGroup ||
      !cpu::quant::blocked_kernels_active())
    return 0;
  return cpu::quant::blocked_bytes(W.shape[0], W.shape[1], q4);
}

void pack_weight_to(TensorView& W, void* dst) {
  auto* out = static_cast<std::uint8_t*>(dst);
  cpu::quant::pack_blocked(W.data, static_cast<const float*>(W.scales), W.shape[0], W.shape[1], W.dtype == DType::kQ4, out);
  W.packed = out;
}

std::int64_t pack_weight_int8_bytes(const TensorView& W) {
  const std::int64_t blocked = pack_weight_bytes(W);
  if (blocked == 0) return 0;
  // T = sw·Σq must be finite (else o·T is ±Inf or NaN where the exact tier is finite): one pass over
  // the codes, rows on all threads.
  const std::int64_t N = W.shape[0], K = W.shape[1], G = K / cpu::quant::kGroup, row_bytes = W.dtype == DType::kQ4 ? K / 2 : K;
  std::atomic<bool> finite{true};
  cpu::parallel_for(N, N * K >= cpu::kParallelMinWork, [&](std::int64_t n0, std::int64_t n1) {
    std::vector<float> T(static_cast<std::size_t>(G));
    for (std::int64_t n = n0; n < n1 && finite.load(std::memory_order_relaxed); ++n) {
      cpu::quant::a8_sums_rows(static_cast<const std::uint8_t*>(W.data) + n * row_bytes, static_cast<const float*>(W.scales) + n * G, 1,
                               K, W.dtype == DType::kQ4, T.data());
      for (float t : T)
        if (!(std::fabs(t) <= FLT_MAX)) finite.store(false, std::memory_order_relaxed);
    }
  });
  return finite.load() ? blocked + cpu::quant::a8_sums_bytes(W.shape[0], W.shape[1]) : 0;
}

void pack_weight_int8_to(TensorView& W, void* dst) {
  pack_weight_to(W, dst);
  const bool q4 = W.dtype == DType::kQ4;
  auto* sums = reinterpret_cast<float*>(static_cast<std::uint8_t*>(dst) + cpu::quant::blocked_bytes(W.shape[0], W.shape[1], q4));
  cpu::quant::pack_a8_sums(W.data, static_cast<const float*>(W.scales), W.shape[0], W.shape[1], q4, sums);
  W.int8_tier = true;
}

bool int8_tier_available() { return cpu::quant::blocked_kernels_active(); }

}  // namespace mamba::ops
