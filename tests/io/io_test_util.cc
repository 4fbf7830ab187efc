#include "io/io_test_util.h"

#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <random>
#include <unistd.h>

namespace mamba::test {

TempDir::TempDir() {
  namespace fs = std::filesystem;
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path p = fs::temp_directory_path() / fmt::format("mamba_io_test_{}_{:x}", ::getpid(), rd());
    std::error_code ec;
    if (fs::create_directory(p, ec)) {
      path_ = p.string();
      return;
    }
  }
  ADD_FAILURE() << "cannot create a temp dir";
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& rel, const std::string& bytes) const {
  namespace fs = std::filesystem;
  fs::path p = fs::path(path_) / rel;
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(f.good()) << "cannot write " << p;
  return p.string();
}

std::vector<std::pair<std::string, TensorView>> all_views(const ModelWeights& w) {
  std::vector<std::pair<std::string, TensorView>> v = {{"embedding", w.embedding}, {"norm_f", w.norm_f}, {"lm_head", w.lm_head}};
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const auto& L = w.layers[i];
    auto add = [&](const char* n, const TensorView& t) { v.emplace_back(fmt::format("layers.{}.{}", i, n), t); };
    add("norm", L.norm); add("in_proj", L.in_proj); add("in_proj_bias", L.in_proj_bias);
    add("conv1d_weight", L.conv1d_weight); add("conv1d_bias", L.conv1d_bias); add("out_proj", L.out_proj);
    add("out_proj_bias", L.out_proj_bias); add("A_log", L.A_log); add("D", L.D); add("x_proj", L.x_proj);
    add("dt_proj", L.dt_proj); add("dt_proj_bias", L.dt_proj_bias); add("dt_bias", L.dt_bias); add("gated_norm", L.gated_norm);
  }
  return v;
}

std::string view_bytes(const TensorView& v) {
  if (v.empty()) return {};
  return std::string(static_cast<const char*>(v.data), v.nbytes());
}

std::string make_safetensors(const std::vector<StTensor>& tensors) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  h["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string hs = h.dump();
  while ((hs.size() + 8) % 8 != 0) hs += ' ';
  std::string out(8, '\0');
  std::uint64_t n = hs.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + hs + data;
}

std::string le(std::uint64_t v, int nbytes) {
  std::string s;
  for (int i = 0; i < nbytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  return s;
}

std::string make_zip(const std::vector<std::pair<std::string, std::string>>& entries, bool zip64) {
  const std::uint64_t kFF = 0xFFFFFFFFu;
  std::string out, central;
  for (const auto& [name, data] : entries) {
    const std::uint64_t offset = out.size();
    const std::string local_extra = zip64 ? le(1, 2) + le(16, 2) + le(data.size(), 8) + le(data.size(), 8) : "";
    const std::string central_extra = zip64 ? le(1, 2) + le(24, 2) + le(data.size(), 8) + le(data.size(), 8) + le(offset, 8) : "";
    const std::uint64_t sz = zip64 ? kFF : data.size();
    out += le(0x04034b50, 4) + le(45, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(0, 4) + le(sz, 4) + le(sz, 4) + le(name.size(), 2) +
           le(local_extra.size(), 2) + name + local_extra + data;
    central += le(0x02014b50, 4) + le(45, 2) + le(45, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(0, 4) + le(sz, 4) + le(sz, 4) +
               le(name.size(), 2) + le(central_extra.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) +
               le(zip64 ? kFF : offset, 4) + name + central_extra;
  }
  const std::uint64_t cd_offset = out.size();
  out += central;
  if (zip64) {
    const std::uint64_t z64 = out.size();
    out += le(0x06064b50, 4) + le(44, 8) + le(45, 2) + le(45, 2) + le(0, 4) + le(0, 4) + le(entries.size(), 8) + le(entries.size(), 8) +
           le(central.size(), 8) + le(cd_offset, 8);
    out += le(0x07064b50, 4) + le(0, 4) + le(z64, 8) + le(1, 4);
    out += le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(0xFFFF, 2) + le(0xFFFF, 2) + le(kFF, 4) + le(kFF, 4) + le(0, 2);
    return out;
  }
  out += le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(entries.size(), 2) + le(entries.size(), 2) + le(central.size(), 4) +
         le(cd_offset, 4) + le(0, 2);
  return out;
}

}  // namespace mamba::test
