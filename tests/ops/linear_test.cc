// ops::linear on every CPU dispatch target: bitwise equal to the canonical reduction order
// (linear_canonical.h), close to the plain reference (ref::linear), and batch-invariant (a row's
// output does not depend on M, the other rows or the thread count).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "ops/cpu/cpu_target.h"
#include "ops/cpu/linear_canonical.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"
#include "ops_test_util.h"

namespace mamba {
namespace {

using ops::cpu::CpuTarget;

/// Restores the dispatch target and thread count a test changed.
class TargetGuard {
 public:
  TargetGuard()
      : target_(ops::cpu::cpu_target()), threads_(ops::num_threads()), prefetch_(ops::cpu::weight_prefetch()),
        batch_tile_(ops::cpu::avx512_batch_tile()) {}
  ~TargetGuard() {
    ops::cpu::set_cpu_target_for_test(target_);
    ops::set_num_threads(threads_);
    ops::cpu::set_weight_prefetch_for_test(prefetch_);
    ops::cpu::set_avx512_batch_tile_for_test(batch_tile_);
  }

 private:
  CpuTarget target_;
  int threads_;
  bool prefetch_;
  bool batch_tile_;
};

/// A random linear problem: W [N, K] stored as `dtype`, `wf` holds the stored values as fp32.
struct Problem {
  std::int64_t M, K, N, ldx, ldy;
  DType dtype;
  bool has_bias;
  std::vector<float> x, wf, bf;
  std::vector<std::uint16_t> wh, bh;
  TensorView W, B;
};

Problem make_problem(std::int64_t M, std::int64_t K, std::int64_t N, DType dtype, bool has_bias, unsigned seed) {
  Problem p{M, K, N, K + 5, N + 3, dtype, has_bias, {}, {}, {}, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  p.x = test::random_vec(M * p.ldx, rng);
  p.wf = test::random_vec(N * K, rng);
  p.bf = test::random_vec(N, rng);
  if (dtype == DType::kF32) {
    p.W = TensorView(p.wf.data(), dtype, {N, K});
    p.B = TensorView(p.bf.data(), dtype, {N});
  } else {
    p.wh = test::to_half(p.wf, dtype, p.wf);
    p.bh = test::to_half(p.bf, dtype, p.bf);
    p.W = TensorView(p.wh.data(), dtype, {N, K});
    p.B = TensorView(p.bh.data(), dtype, {N});
  }
  if (!has_bias) p.B = TensorView();
  return p;
}

std::string describe(const Problem& p) {
  std::ostringstream os;
  os << "M" << p.M << " K" << p.K << " N" << p.N << " " << dtype_name(p.dtype) << (p.has_bias ? " bias" : "")
     << " target " << ops::cpu::cpu_target_name(ops::cpu::cpu_target()) << " threads " << ops::num_threads();
  return os.str();
}

/// Runs ops::linear into a [M, ldy] buffer pre-filled with a sentinel.
std::vector<float> run(const Problem& p) {
  std::vector<float> y(static_cast<std::size_t>(p.M * p.ldy), -7.0f);
  ops::linear(p.x.data(), p.ldx, p.M, p.W, p.B, y.data(), p.ldy);
  return y;
}

void check_against_canonical_and_ref(const Problem& p) {
  const auto y = run(p);
  std::vector<float> yr(y.size(), -7.0f);
  ops::ref::linear(p.x.data(), p.ldx, p.M, p.W, p.B, yr.data(), p.ldy);
  for (std::int64_t m = 0; m < p.M; ++m) {
    const float* x = p.x.data() + m * p.ldx;
    for (std::int64_t n = 0; n < p.N; ++n) {
      const float got = y[std::size_t(m * p.ldy + n)];
      const float want = ops::cpu::canonical_dot(x, p.wf.data() + n * p.K, p.K, p.bf[std::size_t(n)], p.has_bias);
      ASSERT_EQ(std::memcmp(&got, &want, sizeof got), 0)
          << describe(p) << ": y[" << m << ", " << n << "] = " << got << ", canonical " << want;
      double scale = p.has_bias ? std::fabs(p.bf[std::size_t(n)]) : 0.0;
      for (std::int64_t k = 0; k < p.K; ++k) scale += std::fabs(double(x[k]) * p.wf[std::size_t(n * p.K + k)]);
      ASSERT_LE(std::fabs(double(got) - yr[std::size_t(m * p.ldy + n)]), 1e-5 * std::max(scale, 1.0))
          << describe(p) << ": y[" << m << ", " << n << "] vs ref::linear";
    }
    for (std::int64_t n = p.N; n < p.ldy; ++n)
      ASSERT_EQ(y[std::size_t(m * p.ldy + n)], -7.0f) << describe(p) << ": wrote into the ldy padding";
  }
}

TEST(Linear, EveryTargetMatchesCanonicalOrderBitwise) {
  const TargetGuard guard;
  const std::int64_t Ks[] = {1, 15, 17, 48, 100, 769}, Ns[] = {1, 5, 80, 83}, Ms[] = {1, 2, 3, 7, 8, 9, 64, 130};
  const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
  for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
    ops::cpu::set_cpu_target_for_test(t);
    unsigned seed = 1;
    for (std::size_t ik = 0; ik < std::size(Ks); ++ik)
      for (std::size_t in = 0; in < std::size(Ns); ++in)
        for (std::size_t id = 0; id < std::size(dtypes); ++id) {
          // Every M, dtype and bias choice meets every K and N across the loop (rotation, not product).
          const std::int64_t M = Ms[(ik * 3 + in * 5 + id) % std::size(Ms)];
          const bool bias = (ik + in + id) % 2 == 0;
          check_against_canonical_and_ref(make_problem(M, Ks[ik], Ns[in], dtypes[id], bias, seed++));
          if (HasFatalFailure()) return;
        }
  }
}

TEST(Linear, ModelShapesMatchCanonicalOrder) {
  // Shapes of the 130m models' projections (prefill-sized M, decode batches; one row: the
  // three-stream path, with and without its software prefetch, and dt_proj's short rows, 16 at a
  // time: K = 48 as the 130m models, 160 as mamba-2.8b, N not a multiple of 16 and leftovers of 8 and
  // 9–15 rows), with 2 threads, in each dtype.
  const TargetGuard guard;
  ops::set_num_threads(2);
  struct Shape { std::int64_t M, K, N; };
  for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
    ops::cpu::set_cpu_target_for_test(t);
    for (const bool prefetch : {true, false}) {
      ops::cpu::set_weight_prefetch_for_test(prefetch);
      for (const DType dt : {DType::kBF16, DType::kF32, DType::kF16})
        for (const Shape s : {Shape{37, 768, 300}, Shape{5, 1536, 80}, Shape{33, 48, 200}, Shape{8, 768, 130},
                              Shape{1, 768, 301}, Shape{1, 1536, 80}, Shape{1, 48, 1536}, Shape{1, 48, 200},
                              Shape{1, 160, 520}, Shape{1, 120, 13}, Shape{1, 48, 110}}) {
          SCOPED_TRACE(::testing::Message() << "prefetch " << prefetch);
          check_against_canonical_and_ref(make_problem(s.M, s.K, s.N, dt, s.K < 256, unsigned(s.K + s.N)));
          if (HasFatalFailure()) return;
        }
    }
  }
}

TEST(Linear, BatchTilesMatchCanonicalOrder) {
  // More than 4 rows read straight from memory with K ≥ 256: the AVX-512 target runs them 8 at a time
  // (5–7 left over) in tiles of 3 weight rows (linear_tile.inc, kMrBatch × kNrBatch) with their own
  // 16-tree epilogue (lane 2m + n, then column 2) when K % 16 = 0, the generic one otherwise, or 4 at
  // a time × 6 where avx512_batch_tile() says so (both forced here); N leaves 1 or 2 rows over; up
  // to 64 rows while M·K ≤ 96 Ki floats (linear_reads_direct: M = 38 and 40 with K = 2560 fall on
  // either side); with and without bias; 1 and 2 threads.
  const TargetGuard guard;
  struct Shape { std::int64_t M, K, N; };
  unsigned seed = 900;
  for (CpuTarget t : ops::cpu::supported_cpu_targets())
  for (const bool batch_tile : {true, false}) {
    if (!batch_tile && t != CpuTarget::kAvx512) continue;  // the other targets ignore the choice
    ops::cpu::set_cpu_target_for_test(t);
    ops::cpu::set_avx512_batch_tile_for_test(batch_tile);
    SCOPED_TRACE(::testing::Message() << "batch tile " << (batch_tile ? "8x3" : "4x6"));
    for (const int threads : {1, 2}) {
      ops::set_num_threads(threads);
      for (const DType dt : {DType::kBF16, DType::kF32, DType::kF16})
        for (const Shape s : {Shape{8, 256, 3}, Shape{8, 768, 100}, Shape{7, 1536, 80}, Shape{6, 272, 7},
                              Shape{5, 784, 31}, Shape{8, 263, 14}, Shape{6, 512, 1}, Shape{5, 256, 2},
                              Shape{12, 768, 50}, Shape{21, 256, 8}, Shape{64, 1536, 26}, Shape{33, 263, 5},
                              Shape{38, 2560, 4}, Shape{40, 2560, 4}, Shape{65, 256, 3}})
          for (const bool bias : {false, true}) {
            check_against_canonical_and_ref(make_problem(s.M, s.K, s.N, dt, bias, seed++));
            if (HasFatalFailure()) return;
          }
    }
  }
}

TEST(Linear, LongRowsInKSlicesMatchCanonicalOrder) {
  // Many input rows and K ≥ 1024: the AVX-512 target sweeps K in slices (linear_tile.inc
  // sweep_sliced), the 16-lane accumulators carried between them; the last slice holds the K % 16
  // tail. Every target, 1 and 2 threads, each dtype, bitwise the canonical order.
  const TargetGuard guard;
  struct Shape { std::int64_t M, K, N; };
  for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
    ops::cpu::set_cpu_target_for_test(t);
    for (int threads : {1, 2}) {
      ops::set_num_threads(threads);
      for (const DType dt : {DType::kBF16, DType::kF32, DType::kF16})
        for (const Shape s : {Shape{50, 1797, 37}, Shape{13, 1536, 130}, Shape{9, 2048, 7}, Shape{64, 1040, 64},
                              Shape{61, 1024, 25}, Shape{10, 2311, 11}}) {
          check_against_canonical_and_ref(make_problem(s.M, s.K, s.N, dt, s.N % 2 == 1, unsigned(s.K * 3 + s.N)));
          if (HasFatalFailure()) return;
        }
    }
  }
}

TEST(Linear, RowsAloneEqualRowsInABatchForAnyThreadCount) {
  const TargetGuard guard;
  for (CpuTarget t : ops::cpu::supported_cpu_targets()) {
    ops::cpu::set_cpu_target_for_test(t);
    for (DType dt : {DType::kBF16, DType::kF32, DType::kF16}) {
      for (const std::int64_t N : {83, 200}) {  // 83: threads split the rows of x; 200: the rows of W
        Problem p = make_problem(130, 769, N, dt, true, 42);
        for (int threads : {1, 2}) {
          ops::set_num_threads(threads);
          const auto y = run(p);
          Problem one = p;
          for (std::int64_t m : {0, 1, 7, 64, 129}) {
            one.M = 1;
            one.x.assign(p.x.begin() + m * p.ldx, p.x.begin() + (m + 1) * p.ldx);
            const auto y1 = run(one);
            ASSERT_EQ(0, std::memcmp(y1.data(), y.data() + m * p.ldy, sizeof(float) * std::size_t(N)))
                << describe(p) << ": row " << m << " alone differs from the same row at M = 130";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace mamba
