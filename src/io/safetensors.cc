#include "io/safetensors.h"

#include <algorithm>
#include <fmt/format.h>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

#include "core/bounded_json.h"
#include "io/checked_math.h"

namespace mamba::io {

bool safetensors_dtype(const std::string& s, DType* out) {
  struct Entry { const char* name; DType t; };
  static const Entry kTable[] = {
      {"F32", DType::kF32}, {"BF16", DType::kBF16}, {"F16", DType::kF16}, {"F64", DType::kF64},
      {"I64", DType::kI64}, {"I32", DType::kI32},   {"I16", DType::kI16}, {"I8", DType::kI8},
      {"U8", DType::kU8},   {"BOOL", DType::kBool},
  };
  for (const auto& e : kTable) {
    if (s == e.name) {
      *out = e.t;
      return true;
    }
  }
  return false;
}


Result<std::vector<SafetensorsRecord>> parse_safetensors(const std::uint8_t* bytes, std::size_t size,
                                                         const std::string& source,
                                                         std::map<std::string, std::string>* metadata) {
  if (size < 8) {
    return make_error(ErrorCode::kFormat,
                      fmt::format("{}: truncated safetensors file: {} bytes, need at least 8 for the header length", source, size));
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > size - 8) {
    return make_error(ErrorCode::kFormat,
                      fmt::format("{}: safetensors header length {} runs past the end of the file ({} bytes)", source, n, size));
  }
  const std::uint64_t data_start = 8 + n;
  const std::uint64_t data_size = size - data_start;
  const char* hdr = reinterpret_cast<const char*>(bytes + 8);
  // A name given twice is ambiguous (nlohmann keeps the last silently): the first repeat is an error.
  // (parse_json_bounded notes it without a parser callback, which made a header of n tensors cost
  // O(n²): 60 000 entries 24 s, a 20 MB header of 300 000 ~20 minutes.)
  nlohmann::json j;
  std::optional<std::string> repeated;
  if (parse_json_bounded(std::string_view(hdr, static_cast<std::size_t>(n)), j, kMaxJsonDepth, &repeated) || !j.is_object()) {
    return make_error(ErrorCode::kFormat, fmt::format("{}: safetensors header ({} bytes) is not a JSON object", source, n));
  }
  if (repeated) return make_error(ErrorCode::kFormat, fmt::format("{}: safetensors header names tensor '{}' twice", source, *repeated));
  std::vector<SafetensorsRecord> recs;
  recs.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it.value().is_object()) return make_error(ErrorCode::kFormat, fmt::format("{}: \"__metadata__\" is not an object", source));
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) {
          return make_error(ErrorCode::kFormat, fmt::format("{}: __metadata__[\"{}\"] is not a string", source, m.key()));
        }
        if (metadata != nullptr) (*metadata)[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const auto& v = it.value();
    auto bad = [&](const std::string& what) {
      return make_error(ErrorCode::kFormat, fmt::format("{}: tensor '{}': {}", source, name, what));
    };
    if (!v.is_object()) return bad("header entry is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return bad("missing or non-string \"dtype\"");
    if (sh == v.end() || !sh->is_array()) return bad("missing or non-array \"shape\"");
    if (off == v.end() || !off->is_array() || off->size() != 2) return bad("\"data_offsets\" must be [begin, end]");
    SafetensorsRecord r;
    r.name = name;
    const std::string dts = dt->get<std::string>();
    if (!safetensors_dtype(dts, &r.dtype)) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: tensor '{}': unknown dtype \"{}\" (expected F32, BF16, F16, F64, I64, I32, I16, I8, U8 or BOOL)",
                                    source, name, dts));
    }
    if (sh->size() > static_cast<std::size_t>(kMaxDims)) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: tensor '{}': rank {} exceeds the maximum {}", source, name, sh->size(), kMaxDims));
    }
    std::uint64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) return bad(fmt::format("shape {} has a non-integer or negative dimension", sh->dump()));
      std::uint64_t dim = d.get<std::uint64_t>();
      if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) || !checked_mul(numel, dim, &numel)) {
        return bad(fmt::format("shape {} overflows the element count", sh->dump()));
      }
      r.shape.dims[static_cast<std::size_t>(r.shape.rank++)] = static_cast<std::int64_t>(dim);
    }
    if (!(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())  // (past 2^64 − 1 JSON numbers read as floats)
      return bad(fmt::format("data_offsets {}: expected two integers in [0, 2^64)", off->dump()));
    std::uint64_t b = (*off)[0].get<std::uint64_t>(), e = (*off)[1].get<std::uint64_t>();
    if (e < b) return bad(fmt::format("data_offsets [{}, {}] end before begin", b, e));
    if (e > data_size) {
      return bad(fmt::format("data_offsets [{}, {}] out of range: the data buffer has {} bytes", b, e, data_size));
    }
    std::uint64_t nbytes = 0;
    if (!checked_mul(numel, static_cast<std::uint64_t>(dtype_size(r.dtype)), &nbytes)) {
      return bad(fmt::format("shape {} × {} overflows the byte size", sh->dump(), dts));
    }
    if (nbytes != e - b) {
      return bad(fmt::format("shape {} × {} ({} bytes each) = {} bytes, but data_offsets [{}, {}] span {} bytes",
                             sh->dump(), dts, dtype_size(r.dtype), nbytes, b, e, e - b));
    }
    r.begin = data_start + b;
    r.end = data_start + e;
    recs.push_back(std::move(r));
  }
  std::sort(recs.begin(), recs.end(), [](const SafetensorsRecord& a, const SafetensorsRecord& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (std::size_t i = 1; i < recs.size(); ++i) {
    const auto& p = recs[i - 1];
    const auto& c = recs[i];
    if (c.begin < p.end) {
      return make_error(ErrorCode::kFormat,
                        fmt::format("{}: tensors '{}' (bytes [{}, {})) and '{}' (bytes [{}, {})) overlap", source, p.name,
                                    p.begin - data_start, p.end - data_start, c.name, c.begin - data_start, c.end - data_start));
    }
  }
  return recs;
}

}  // namespace mamba::io
