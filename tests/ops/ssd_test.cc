// The chunked SSD op against the sequential recurrence (ops::ref::ssd): outputs and the state at
// every chunk boundary, chunk_size smaller than the sequence, lengths that are and are not
// multiples of it, starts mid-chunk, n_groups 1/2/4, non-zero initial states; and the property the
// server relies on: splitting at absolute multiples of chunk_size is bitwise identical. The bf16
// tier's products (SsdArgs::bf16_products) against the fp32 SSD, with the same invariances.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/cpu/cpu_target.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"
#include "ops_test_util.h"

namespace mamba {
namespace {

using test::max_abs_diff;
using test::random_vec;

struct SsdCase { std::int64_t L, H, P, N, G, Q, position; };
void PrintTo(const SsdCase& c, std::ostream* os) {
  *os << "L" << c.L << "_H" << c.H << "_P" << c.P << "_N" << c.N << "_G" << c.G << "_Q" << c.Q << "_pos" << c.position;
}

struct SsdData {
  std::int64_t ldx, lddt, ldbc, ldy;
  std::vector<float> x, dt, A, B, C, D, h0;
  SsdData(const SsdCase& c, std::mt19937& rng)
      : ldx(c.H * c.P + 3), lddt(c.H + 1), ldbc(c.G * c.N + 2), ldy(c.H * c.P) {
    x = random_vec(c.L * ldx, rng);
    dt = random_vec(c.L * lddt, rng, 0.01f, 0.6f);
    A = random_vec(c.H, rng, -3.0f, -0.1f);
    B = random_vec(c.L * ldbc, rng);
    C = random_vec(c.L * ldbc, rng);
    D = random_vec(c.H, rng);
    h0 = random_vec(c.H * c.P * c.N, rng);  // non-zero incoming state
  }
  ops::SsdArgs args(const SsdCase& c, float* state, float* y, float* chunk_states) const {
    ops::SsdArgs a;
    a.L = c.L; a.H = c.H; a.P = c.P; a.N = c.N; a.G = c.G; a.Q = c.Q; a.position = c.position;
    a.x = x.data(); a.ldx = ldx; a.dt = dt.data(); a.lddt = lddt; a.A = A.data();
    a.B = B.data(); a.ldb = ldbc; a.C = C.data(); a.ldc = ldbc; a.D = D.data();
    a.ssm_state = state; a.y = y; a.ldy = ldy; a.chunk_states = chunk_states;
    return a;
  }
};

class SsdVsRecurrence : public ::testing::TestWithParam<SsdCase> {};

TEST_P(SsdVsRecurrence, OutputsAndChunkStates) {
  const SsdCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.L * 1000 + c.G * 10 + c.position));
  SsdData d(c, rng);
  const std::int64_t S = c.H * c.P * c.N, n_chunks = ops::ssd_num_chunks(c.position, c.L, c.Q);
  ASSERT_GE(n_chunks, 1);
  auto h = d.h0, hr = d.h0;
  std::vector<float> y(c.L * d.ldy), yr(c.L * d.ldy), cs(n_chunks * S), csr(n_chunks * S);
  ops::ssd(d.args(c, h.data(), y.data(), cs.data()));
  ops::ref::ssd(d.args(c, hr.data(), yr.data(), csr.data()));
  for (std::int64_t t = 0; t < c.L; ++t)
    EXPECT_LE(max_abs_diff(y.data() + t * d.ldy, yr.data() + t * d.ldy, c.H * c.P), 2e-5) << "token " << t;
  for (std::int64_t k = 0; k < n_chunks; ++k)
    EXPECT_LE(max_abs_diff(cs.data() + k * S, csr.data() + k * S, S), 2e-5) << "chunk " << k;
  EXPECT_LE(max_abs_diff(h.data(), hr.data(), S), 2e-5);
  EXPECT_EQ(0, std::memcmp(h.data(), cs.data() + (n_chunks - 1) * S, sizeof(float) * S));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SsdVsRecurrence,
    ::testing::Values(SsdCase{1, 2, 3, 4, 1, 4, 0},      // one token
                      SsdCase{16, 4, 5, 8, 1, 4, 0},     // multiple of Q
                      SsdCase{19, 4, 5, 8, 2, 4, 0},     // not a multiple
                      SsdCase{23, 8, 3, 6, 4, 8, 5},     // starts mid-chunk, G = 4
                      SsdCase{40, 4, 16, 16, 2, 16, 0},  // mamba2-tiny's shape
                      SsdCase{7, 8, 12, 8, 4, 8, 3},     // shorter than a chunk, mid-chunk
                      SsdCase{64, 2, 7, 5, 2, 16, 16},   // starts exactly on a boundary
                      SsdCase{50, 6, 4, 3, 1, 64, 30},   // Q larger than the sequence
                      SsdCase{300, 8, 16, 128, 4, 48, 5}));  // parallel: 40 (chunk, group) items, chunks shorter than Q

/// Runs the SSD of c over d from its h0 (split at the relative cuts, each ending a piece), bf16 or
/// not; returns y then the final state.
std::vector<float> run_ssd(const SsdCase& c, const SsdData& d, bool bf16, std::vector<std::int64_t> cuts = {}) {
  const std::int64_t S = c.H * c.P * c.N;
  std::vector<float> out(static_cast<std::size_t>(c.L * d.ldy + S));
  std::copy(d.h0.begin(), d.h0.end(), out.begin() + c.L * d.ldy);
  cuts.push_back(c.L);
  std::int64_t t0 = 0;
  for (std::int64_t t1 : cuts) {
    SsdCase part = c;
    part.L = t1 - t0;
    part.position = c.position + t0;
    ops::SsdArgs a = d.args(part, out.data() + c.L * d.ldy, out.data() + t0 * d.ldy, nullptr);
    a.x += t0 * d.ldx; a.dt += t0 * d.lddt; a.B += t0 * d.ldbc; a.C += t0 * d.ldbc;
    a.bf16_products = bf16;
    ops::ssd(a);
    t0 = t1;
  }
  return out;
}

TEST(Ssd, SplitAtChunkMultiplesIsBitwiseIdentical) {
  const SsdCase c{45, 4, 6, 8, 2, 8, 3};
  std::mt19937 rng(23);
  const SsdData d(c, rng);
  const std::vector<float> whole = run_ssd(c, d, false);  // y, then the final state
  // Cuts at absolute positions 8, 16, 32 (multiples of Q) → relative 5, 13, 29.
  for (const std::vector<std::int64_t>& cuts : {std::vector<std::int64_t>{5}, {13, 29}, {5, 13, 29}})
    EXPECT_EQ(0, std::memcmp(run_ssd(c, d, false, cuts).data(), whole.data(), sizeof(float) * whole.size()));
}

// The SSD's parallel path (L·H·P·N ≥ kParallelMinWork): its (chunk, group) items — each thread's
// own Bᵀ buffer, G > 1, chunks shorter than min(Q, 64) — and its heads on 1, 2 and 3 threads,
// bitwise the same, fp32 and bf16 products (40 items of N = 128, so the threads overlap).
TEST(Ssd, ParallelPathIsThreadInvariant) {
  const SsdCase c{300, 8, 16, 128, 4, 48, 5};
  std::mt19937 rng(31);
  const SsdData d(c, rng);
  const int saved = ops::num_threads();
  for (const bool bf16 : {false, true}) {
    ops::set_num_threads(1);
    const std::vector<float> one = run_ssd(c, d, bf16);
    for (const int threads : {2, 3}) {
      ops::set_num_threads(threads);
      EXPECT_EQ(0, std::memcmp(run_ssd(c, d, bf16).data(), one.data(), sizeof(float) * one.size()))
          << threads << " threads, bf16 " << bf16;
    }
  }
  ops::set_num_threads(saved);
}

// The bf16 tier (SsdArgs::bf16_products): near the fp32 SSD (each product of two bf16-rounded
// operands, relative rounding ≤ 2⁻⁹ each), bitwise the fp32 SSD where its kernels do not run (another
// target, or P not a multiple of 16), and as invariant as the fp32 SSD: splits at absolute multiples
// of Q and the thread count leave every bit unchanged.
class SsdBf16Products : public ::testing::TestWithParam<SsdCase> {
 protected:
  void TearDown() override { ops::cpu::set_cpu_target_for_test(saved_); }
  ops::cpu::CpuTarget saved_ = ops::cpu::cpu_target();
};

TEST_P(SsdBf16Products, NearFp32BitwiseWhereNotRunAndSplitAndThreadInvariant) {
  const SsdCase c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.L * 7 + c.P));
  const SsdData d(c, rng);
  test::for_each_target([&] {
    // Asked per target (for_each_target switches it; MAMBA_CPU_TARGET may have forced a lower one).
    const bool here = ops::bf16_tier_available() && c.P % 16 == 0;
    const std::vector<float> exact = run_ssd(c, d, false), bf16 = run_ssd(c, d, true);
    if (!here) {
      EXPECT_EQ(0, std::memcmp(exact.data(), bf16.data(), sizeof(float) * exact.size()));
      return;
    }
    // Scale of the values: y sums ~N·P products of O(1) terms through decays ≤ 1.
    float scale = 1.0f;
    for (float v : exact) scale = std::max(scale, std::fabs(v));
    EXPECT_LE(max_abs_diff(bf16.data(), exact.data(), static_cast<std::int64_t>(exact.size())), 1e-2f * scale);
    EXPECT_NE(0, std::memcmp(exact.data(), bf16.data(), sizeof(float) * exact.size())) << "the bf16 products did not run";
    // Split at absolute multiples of Q (relative cuts Q − position % Q, + Q, …).
    std::vector<std::int64_t> cuts;
    for (std::int64_t t = c.Q - c.position % c.Q; t < c.L; t += 2 * c.Q) cuts.push_back(t);
    EXPECT_EQ(0, std::memcmp(run_ssd(c, d, true, cuts).data(), bf16.data(), sizeof(float) * bf16.size()));
    const int saved = ops::num_threads();
    ops::set_num_threads(1);
    const std::vector<float> one_thread = run_ssd(c, d, true);
    ops::set_num_threads(saved);
    EXPECT_EQ(0, std::memcmp(one_thread.data(), bf16.data(), sizeof(float) * bf16.size()));
  });
}

// A NaN or ±inf in x, B, C, Δ or the incoming state reaches y and the state exactly where the fp32
// SSD puts them (fresh and carried states: a fresh state's first chunk skips the zero state's part
// only while every decay is finite).
TEST(SsdBf16Products, NonFiniteValuesReachTheSameOutputsAsFp32) {
  if (!ops::bf16_tier_available()) GTEST_SKIP() << "this CPU has no AVX-512 BF16: the bf16 products do not run here";
  const SsdCase c{70, 2, 32, 8, 1, 64, 0};
  const std::int64_t S = c.H * c.P * c.N;
  int cases = 0;
  for (const float bad : {std::nanf(""), INFINITY, -INFINITY})
    for (int where = 0; where < 5; ++where)
      for (const bool fresh : {true, false})
        for (const std::int64_t t : {0, 37}) {  // a chunk's first token (its row has one term) or a later one
          std::mt19937 rng(static_cast<unsigned>(where * 10 + fresh));
          SsdData d(c, rng);
          if (fresh) std::fill(d.h0.begin(), d.h0.end(), 0.0f);
          switch (where) {
            case 0: d.x[std::size_t(t * d.ldx + 5)] = bad; break;
            case 1: d.B[std::size_t(t * d.ldbc + 3)] = bad; break;
            case 2: d.C[std::size_t(t * d.ldbc + 2)] = bad; break;
            case 3: d.dt[std::size_t(t * d.lddt + 1)] = bad; break;
            default: d.h0[std::size_t(S / 2)] = bad; break;
          }
          const std::vector<float> exact = run_ssd(c, d, false), bf16 = run_ssd(c, d, true);
          for (std::size_t i = 0; i < exact.size(); ++i) {
            SCOPED_TRACE(testing::Message() << "bad " << bad << " in input " << where << " at token " << t
                                            << (fresh ? ", fresh state" : "") << ", output " << i);
            ASSERT_EQ(std::isnan(exact[i]), std::isnan(bf16[i]));
            ASSERT_EQ(std::isinf(exact[i]), std::isinf(bf16[i]));
            if (std::isinf(exact[i])) {
              ASSERT_EQ(exact[i], bf16[i]);
            }
          }
          ++cases;
        }
  EXPECT_EQ(cases, 60);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, SsdBf16Products,
    ::testing::Values(SsdCase{40, 4, 16, 16, 2, 16, 0},    // mamba2-tiny's shape
                      SsdCase{131, 3, 64, 128, 1, 256, 0},  // mamba2-130m's head (H cut), 64-token sub-chunks
                      SsdCase{77, 4, 48, 5, 2, 32, 13},     // odd N, odd chunk lengths, mid-chunk start
                      SsdCase{90, 2, 80, 33, 2, 64, 1},     // P = 64 + 16 (two column tiles), odd position
                      SsdCase{33, 2, 128, 8, 1, 8, 3},      // P = 128
                      SsdCase{45, 4, 6, 8, 2, 8, 3},        // P not a multiple of 16: the fp32 SSD
                      SsdCase{1, 2, 32, 16, 1, 16, 5}));    // one token

TEST(Ssd, NumChunks) {
  EXPECT_EQ(ops::ssd_num_chunks(0, 16, 16), 1);
  EXPECT_EQ(ops::ssd_num_chunks(0, 17, 16), 2);
  EXPECT_EQ(ops::ssd_num_chunks(15, 2, 16), 2);
  EXPECT_EQ(ops::ssd_num_chunks(16, 1, 16), 1);
  EXPECT_EQ(ops::ssd_num_chunks(3, 45, 8), 6);
}

}  // namespace
}  // namespace mamba
