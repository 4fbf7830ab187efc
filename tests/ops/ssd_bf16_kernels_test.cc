// The bf16 tier's SSD kernels (src/ops/cpu/ssd_bf16.h) against their definitions computed here:
// the row- and column-pair packings bitwise equal to the tier's bf16 rounding (odd K, strides, row
// scales, denormals, ±inf, NaNs; the row packing also rounds ops::linear's activations), and gemm_pairs bitwise equal to one VDPBF16PS chain per element (odd
// product first, DAZ in / FTZ out) for every tile shape, with accumulate / beta / row_scale.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "mamba/tensor.h"
#include "ops/cpu/bf16_dot.h"
#include "ops/cpu/ssd_bf16.h"
#include "ops/ops_test_util.h"

namespace mamba {
namespace {

namespace bd = ops::cpu::bf16dot;

#define MAMBA_REQUIRE_BF16_KERNELS()                                                                  \
  do {                                                                                                \
    if (!bd::kernels_available()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: the kernels do not run here"; \
  } while (0)

/// The tier's bf16 of v: a denormal v is ±0, then round to nearest even (bf16_dot.h to_bf16).
std::uint32_t tier_bf16(float v) {
  if (std::fabs(v) < FLT_MIN) v = std::copysign(0.0f, v);
  return f32_to_bf16(v);
}
float lo_of(std::uint32_t u) { return bf16_to_f32(static_cast<std::uint16_t>(u & 0xffffu)); }
float hi_of(std::uint32_t u) { return bf16_to_f32(static_cast<std::uint16_t>(u >> 16)); }
float daz(float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; }

/// Random values with a few denormals, ±inf, NaNs and zeros mixed in.
std::vector<float> mixed_vec(std::int64_t n, std::mt19937& rng) {
  std::vector<float> v = test::random_vec(n, rng, -2.0f, 2.0f);
  std::uniform_int_distribution<std::int64_t> at(0, n - 1);
  for (int i = 0; i < 4 && n > 8; ++i) {
    v[static_cast<std::size_t>(at(rng))] = 3e-39f;  // denormal → +0
    v[static_cast<std::size_t>(at(rng))] = -0.0f;
  }
  if (n > 8) {
    v[static_cast<std::size_t>(at(rng))] = INFINITY;
    v[static_cast<std::size_t>(at(rng))] = -INFINITY;
    v[static_cast<std::size_t>(at(rng))] = std::nextafter(FLT_MIN, 0.0f);  // plain RNE would give FLT_MIN
    v[static_cast<std::size_t>(at(rng))] = std::nanf("");
    const std::uint32_t signalling = 0xff800001u;  // a signalling NaN with a low payload: quieted, kept NaN
    std::memcpy(&v[static_cast<std::size_t>(at(rng))], &signalling, 4);
  }
  return v;
}

TEST(SsdBf16Kernels, PackingsBitwiseEqualTheTierRounding) {
  MAMBA_REQUIRE_BF16_KERNELS();
  std::mt19937 rng(7);
  for (std::int64_t K : {1, 2, 7, 16, 31, 32, 33, 64, 127}) {
    for (std::int64_t n : {16, 48, 80}) {
      SCOPED_TRACE(testing::Message() << "K " << K << " n " << n);
      const std::int64_t ldx = n + 5, Kp = (K + 1) / 2, ldo = n + 16;
      const std::vector<float> X = mixed_vec(K * ldx, rng), s = test::random_vec(K, rng, 0.0f, 3.0f);
      // Column pairs, with and without row scales.
      for (const float* scale : {static_cast<const float*>(nullptr), s.data()}) {
        std::vector<std::uint32_t> out(static_cast<std::size_t>(Kp * ldo), 0xdeadbeefu);
        bd::pack_col_pairs_avx512bf16(X.data(), ldx, K, n, scale, out.data(), ldo);
        for (std::int64_t p = 0; p < Kp; ++p)
          for (std::int64_t j = 0; j < ldo; ++j) {
            std::uint32_t want = 0xdeadbeefu;  // beyond n: untouched
            if (j < n) {
              const float v0 = X[2 * p * ldx + j] * (scale ? scale[2 * p] : 1.0f);
              const float v1 = 2 * p + 1 < K ? X[(2 * p + 1) * ldx + j] * (scale ? scale[2 * p + 1] : 1.0f) : 0.0f;
              want = tier_bf16(v0) | tier_bf16(v1) << 16;
            }
            ASSERT_EQ(out[p * ldo + j], want) << "col pairs p " << p << " j " << j;
          }
      }
      // Row pairs: X's first n rows as [n, K] with row stride ldx.
      std::vector<std::uint32_t> rows(static_cast<std::size_t>(n * (Kp + 3)), 0xdeadbeefu);
      bd::pack_row_pairs_avx512bf16(X.data(), ldx, std::min(n, K), K, rows.data(), Kp + 3);
      for (std::int64_t i = 0; i < std::min(n, K); ++i)
        for (std::int64_t p = 0; p < Kp + 3; ++p) {
          std::uint32_t want = 0xdeadbeefu;
          if (p < Kp) want = tier_bf16(X[i * ldx + 2 * p]) | (2 * p + 1 < K ? tier_bf16(X[i * ldx + 2 * p + 1]) : 0u) << 16;
          ASSERT_EQ(rows[i * (Kp + 3) + p], want) << "row pairs i " << i << " p " << p;
        }
    }
  }
}

TEST(SsdBf16Kernels, GemmPairsBitwiseEqualsOneDotChainPerElement) {
  MAMBA_REQUIRE_BF16_KERNELS();
  std::mt19937 rng(11);
  for (std::int64_t M : {1, 5, 6, 7, 13}) {
    for (std::int64_t n : {16, 32, 48, 64, 80, 128}) {
      for (std::int64_t Kp : {1, 3, 32, 64}) {
        for (int mode = 0; mode < 3; ++mode) {  // overwrite; accumulate with beta; overwrite with row_scale
          SCOPED_TRACE(testing::Message() << "M " << M << " n " << n << " Kp " << Kp << " mode " << mode);
          const std::int64_t lda = Kp + 2, ldb = n + 16, ldc = n + 3;
          std::vector<std::uint32_t> A(static_cast<std::size_t>(M * lda)), B(static_cast<std::size_t>(Kp * ldb));
          const std::vector<float> av = test::random_vec(2 * M * lda, rng), bv = test::random_vec(2 * Kp * ldb, rng);
          for (std::size_t i = 0; i < A.size(); ++i) A[i] = tier_bf16(av[2 * i]) | tier_bf16(av[2 * i + 1]) << 16;
          for (std::size_t i = 0; i < B.size(); ++i) B[i] = tier_bf16(bv[2 * i]) | tier_bf16(bv[2 * i + 1]) << 16;
          const std::vector<float> C0 = test::random_vec(M * ldc, rng), scale = test::random_vec(M, rng, 0.1f, 2.0f);
          ops::cpu::GemmOut o;
          if (mode == 1) {
            o.accumulate = true;
            o.beta = 0.75f;
          }
          if (mode == 2) o.row_scale = scale.data();
          std::vector<float> C = C0;
          bd::gemm_pairs_avx512bf16(M, n, Kp, A.data(), lda, B.data(), ldb, C.data(), ldc, o);
          for (std::int64_t i = 0; i < M; ++i)
            for (std::int64_t j = 0; j < ldc; ++j) {
              float want = C0[i * ldc + j];  // beyond n: untouched
              if (j < n) {
                float r = o.accumulate ? C0[i * ldc + j] * o.beta : 0.0f;
                for (std::int64_t p = 0; p < Kp; ++p) {
                  const std::uint32_t a = A[i * lda + p], b = B[p * ldb + j];
                  r = daz(std::fma(daz(hi_of(b)), daz(hi_of(a)), r));
                  r = daz(std::fma(daz(lo_of(b)), daz(lo_of(a)), r));
                }
                want = o.row_scale != nullptr ? r * o.row_scale[i] : r;
              }
              ASSERT_EQ(std::memcmp(&C[i * ldc + j], &want, 4), 0) << "i " << i << " j " << j << ": " << C[i * ldc + j] << " vs " << want;
            }
        }
      }
    }
  }
}

}  // namespace
}  // namespace mamba
