#include "common/reference_data.h"

#include <gtest/gtest.h>

#include <cstring>

#include "common/test_util.h"

namespace mamba::test {

const RefTensor& ReferenceData::at(const std::string& name) const {
  static const RefTensor empty;
  auto it = tensors.find(name);
  if (it == tensors.end()) {
    ADD_FAILURE() << "reference tensor '" << name << "' missing";
    return empty;
  }
  return it->second;
}

ReferenceData load_reference(const std::string& dir) {
  ReferenceData r;
  r.json = nlohmann::json::parse(read_file(dir + "/reference.json"), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(r.json.is_discarded()) << dir << "/reference.json is not valid JSON";
  const std::string bytes = read_file(dir + "/reference.safetensors");
  if (bytes.size() < 8) {
    ADD_FAILURE() << dir << "/reference.safetensors is too short";
    return r;
  }
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > bytes.size() - 8) {
    ADD_FAILURE() << dir << "/reference.safetensors: bad header length";
    return r;
  }
  auto header = nlohmann::json::parse(bytes.substr(8, n), nullptr, false);
  const char* data = bytes.data() + 8 + n;
  const std::size_t data_size = bytes.size() - 8 - n;
  for (auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    RefTensor t;
    std::int64_t numel = 1;
    for (auto& d : info["shape"]) {
      t.shape.push_back(d.get<std::int64_t>());
      numel *= t.shape.back();
    }
    const auto b = info["data_offsets"][0].get<std::size_t>(), e = info["data_offsets"][1].get<std::size_t>();
    const std::string dtype = info["dtype"];
    if (e > data_size || b > e || e - b != std::size_t(numel) * 4 || (dtype != "F32" && dtype != "I32")) {
      ADD_FAILURE() << dir << ": reference tensor " << name << " has an unexpected layout/dtype " << dtype;
      continue;
    }
    if (dtype == "F32") {
      t.f32.resize(std::size_t(numel));
      std::memcpy(t.f32.data(), data + b, e - b);
    } else {
      t.i32.resize(std::size_t(numel));
      std::memcpy(t.i32.data(), data + b, e - b);
    }
    r.tensors.emplace(name, std::move(t));
  }
  return r;
}

}  // namespace mamba::test
