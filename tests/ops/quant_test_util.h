// A random quantized weight for the quantized-linear tests (exact tier and int8 tier).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "mamba/quantize.h"
#include "mamba/tensor.h"
#include "ops/ops.h"
#include "ops/ref/ref_ops.h"

namespace mamba::test {

/// A q8 / q4 weight [N, K] quantized from random fp32 values (every 7th row from 3 on starts with an
/// all-zero group), its dequantized copy `deq` [N, K], and with `int8_tier` the int8 tier's packed
/// copy (ops::pack_weight_int8_to; none where the CPU lacks AVX-512 VNNI).
struct QWeight {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales, deq;
  TensorView view;
  Tensor packed;
  QWeight(std::int64_t N, std::int64_t K, bool q4, std::mt19937& rng, bool int8_tier = false) {
    const std::int64_t G = K / kQuantGroupSize, row_bytes = q4 ? K / 2 : K;
    codes.resize(std::size_t(N * row_bytes));
    scales.resize(std::size_t(N * G));
    deq.resize(std::size_t(N * K));
    std::normal_distribution<float> nd(0.0f, 0.05f);
    std::vector<float> row(static_cast<std::size_t>(K));
    for (std::int64_t n = 0; n < N; ++n) {
      for (auto& v : row) v = nd(rng);
      if (n % 7 == 3) std::fill(row.begin(), row.begin() + kQuantGroupSize, 0.0f);
      const Status st = q4 ? quantize_row_q4(row.data(), K, codes.data() + n * row_bytes, scales.data() + n * G)
                           : quantize_row_q8(row.data(), K, reinterpret_cast<std::int8_t*>(codes.data()) + n * row_bytes, scales.data() + n * G);
      if (!st.ok()) ADD_FAILURE() << st.message();
    }
    view = TensorView(codes.data(), q4 ? DType::kQ4 : DType::kQ8, Shape{N, K});
    view.scales = scales.data();
    view.group_size = kQuantGroupSize;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(N));
    for (std::int64_t n = 0; n < N; ++n) ids[std::size_t(n)] = std::int32_t(n);
    ops::ref::embedding(view, ids, deq.data());  // the plain dequantized table (ops::embedding checked against it)
    const std::int64_t bytes = int8_tier ? ops::pack_weight_int8_bytes(view) : 0;
    if (bytes > 0) {
      packed = Tensor(DType::kU8, Shape{bytes});
      ops::pack_weight_int8_to(view, packed.data<std::uint8_t>());
    }
  }
};

}  // namespace mamba::test
