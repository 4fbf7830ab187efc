// Test-only reader of the shared reference data: reference.json and reference.safetensors
// (F32 / I32 tensors). Kept tiny on purpose; the product's loader lives in src/io.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mamba::test {

struct RefTensor {
  std::vector<std::int64_t> shape;
  std::vector<float> f32;          ///< when dtype F32
  std::vector<std::int32_t> i32;   ///< when dtype I32
};

struct ReferenceData {
  nlohmann::json json;                       ///< reference.json
  std::map<std::string, RefTensor> tensors;  ///< reference.safetensors
  /// The tensor `name`; fails the test (ADD_FAILURE) and returns an empty one when absent.
  const RefTensor& at(const std::string& name) const;
  bool has(const std::string& name) const { return tensors.count(name) != 0; }
};

/// Reads <dir>/reference.json and <dir>/reference.safetensors; ASSERT-style failures via gtest.
ReferenceData load_reference(const std::string& dir);

}  // namespace mamba::test
