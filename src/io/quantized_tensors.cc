// Loading mamba.cpp q8/q4 checkpoints: code + scale tensor pairs fused into one kQ8/kQ4 view.
//
// Stored (README §"Quantized weights"):  X        I8 [N, K]   (q8)  |  U8 [N, K/2]  (q4, 2 codes/byte)
//                                         X_scale  F32 [N, K/32]
// Loaded:                                 X        kQ8 / kQ4, logical shape [N, K], scales → X_scale.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <set>

#include "io/checkpoint_builder.h"

namespace mamba::io {
namespace {

constexpr const char* kScaleSuffix = "_scale";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Status metadata_agrees(const CheckpointContents& c, const ModelConfig& config, const std::string& dir) {
  if (config.quant_type.empty()) {
    for (const auto& [path, meta] : c.file_metadata) {
      if (meta.count(kQuantMetaType) != 0) {
        return make_error(ErrorCode::kFormat,
                          fmt::format("{}: metadata says {} = \"{}\" but {}/config.json has no quantization_config", path,
                                      kQuantMetaType, meta.at(kQuantMetaType), dir));
      }
    }
    return {};
  }
  if (c.file_metadata.empty()) {
    return make_error(ErrorCode::kFormat,
                      fmt::format("{}/config.json: quantization_config says {} but the weights are not safetensors "
                                  "(quantized checkpoints are always model.safetensors)", dir, config.quant_type));
  }
  const std::string group = std::to_string(config.quant_group_size);
  for (const auto& [path, meta] : c.file_metadata) {
    auto t = meta.find(kQuantMetaType);
    auto g = meta.find(kQuantMetaGroup);
    if (t == meta.end() || t->second != config.quant_type || g == meta.end() || g->second != group) {
      return make_error(ErrorCode::kFormat,
                        fmt::format("{}: __metadata__ must say {} = \"{}\" and {} = \"{}\" as {}/config.json's quantization_config "
                                    "does; got \"{}\" and \"{}\"", path, kQuantMetaType, config.quant_type, kQuantMetaGroup, group, dir,
                                    t == meta.end() ? "(missing)" : t->second, g == meta.end() ? "(missing)" : g->second));
    }
  }
  return {};
}

}  // namespace

Status fuse_quantized(CheckpointContents& c, const ModelConfig& config, const std::string& dir) {
  MAMBA_RETURN_IF_ERROR(metadata_agrees(c, config, dir));
  if (config.quant_type.empty()) return {};
  const bool q4 = config.quant_type == "q4";
  const DType code_dtype = q4 ? DType::kU8 : DType::kI8;
  const std::int64_t gs = config.quant_group_size;

  std::set<std::string> scale_names;
  for (auto& e : c.tensors) {
    if (e.view.dtype != DType::kI8 && e.view.dtype != DType::kU8) continue;
    const std::string sname = e.name + kScaleSuffix;
    auto si = c.index.find(sname);
    if (si == c.index.end()) {
      return make_error(ErrorCode::kNotFound,
                        fmt::format("{}: tensor '{}' holds {} codes but its scale tensor '{}' is missing", e.file, e.name,
                                    dtype_name(e.view.dtype), sname));
    }
    const TensorEntry& s = c.tensors[si->second];
    if (e.view.dtype != code_dtype || e.view.shape.rank != 2) {
      return make_error(ErrorCode::kShape,
                        fmt::format("{}: tensor '{}': expected {} codes of rank 2 for {}, got {} {}", e.file, e.name,
                                    dtype_name(code_dtype), config.quant_type, dtype_name(e.view.dtype), e.view.shape.str()));
    }
    const std::int64_t N = e.view.shape[0], K = q4 ? 2 * e.view.shape[1] : e.view.shape[1];
    if (K % gs != 0 || K == 0) {
      return make_error(ErrorCode::kShape,
                        fmt::format("{}: tensor '{}': {} columns (K = {}) is not a positive multiple of the group size {}", e.file, e.name,
                                    e.view.shape[1], K, gs));
    }
    const Shape want{N, K / gs};
    if (s.view.dtype != DType::kF32 || s.view.shape != want) {
      return make_error(ErrorCode::kShape,
                        fmt::format("{}: tensor '{}' (scales of '{}' {} {}): expected F32 {}, got {} {}", s.file, sname, e.name,
                                    dtype_name(e.view.dtype), e.view.shape.str(), want.str(), dtype_name(s.view.dtype),
                                    s.view.shape.str()));
    }
    // A NaN / ±inf scale would surface only as non-finite logits far from its cause: name it here.
    {
      const auto* sv = static_cast<const float*>(s.view.data);
      const std::int64_t n_scales = N * (K / gs);
      for (std::int64_t i = 0; i < n_scales; ++i) {
        if (!std::isfinite(sv[i])) {
          return make_error(ErrorCode::kFormat,
                            fmt::format("{}: tensor '{}': scale {} at [{}, {}] (weights {}..{} of row {}); scales must be finite",
                                        s.file, sname, sv[i], i / (K / gs), i % (K / gs), i % (K / gs) * gs,
                                        i % (K / gs) * gs + gs - 1, i / (K / gs)));
        }
      }
    }
    // q8 codes are in [−127, 127]: −128 (0x80) has no negation in int8 and would make the
    // targets' int8 kernels disagree, so a file holding it is refused (one memchr over the codes).
    if (!q4) {
      const void* bad = std::memchr(e.view.data, 0x80, static_cast<std::size_t>(N * K));
      if (bad != nullptr) {
        const auto at = static_cast<std::int64_t>(static_cast<const std::uint8_t*>(bad) -
                                                  static_cast<const std::uint8_t*>(e.view.data));
        return make_error(ErrorCode::kFormat,
                          fmt::format("{}: tensor '{}': q8 code -128 at [{}, {}]; codes must be in [-127, 127]", e.file,
                                      e.name, at / K, at % K));
      }
    }
    TensorView v(e.view.data, q4 ? DType::kQ4 : DType::kQ8, Shape{N, K});
    v.scales = s.view.data;
    v.scale_dtype = DType::kF32;
    v.group_size = static_cast<int>(gs);
    e.view = v;
    scale_names.insert(sname);
  }
  // Scales without codes, then drop the fused scale entries from the table (their bytes stay
  // mapped and counted in weight_bytes).
  for (const auto& e : c.tensors) {
    if (ends_with(e.name, kScaleSuffix) && scale_names.count(e.name) == 0) {
      const std::string base = e.name.substr(0, e.name.size() - std::string(kScaleSuffix).size());
      auto bi = c.index.find(base);
      return make_error(ErrorCode::kFormat,
                        fmt::format("{}: scale tensor '{}' has no {} code tensor '{}' ({})", e.file, e.name, dtype_name(code_dtype),
                                    base, bi == c.index.end() ? "missing" : fmt::format("stored as {}", dtype_name(c.tensors[bi->second].view.dtype))));
    }
  }
  std::vector<TensorEntry> kept;
  kept.reserve(c.tensors.size() - scale_names.size());
  for (auto& e : c.tensors)
    if (scale_names.count(e.name) == 0) kept.push_back(std::move(e));
  c.tensors = std::move(kept);
  c.index.clear();
  for (std::size_t i = 0; i < c.tensors.size(); ++i) c.index.emplace(c.tensors[i].name, i);
  return {};
}

}  // namespace mamba::io
