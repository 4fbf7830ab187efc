// `mamba-cli quantize`: group-wise symmetric q8 / q4 weights written as a safetensors checkpoint.
// Format and rules: include/mamba/quantize.h (and README §"Quantized weights").
#include "mamba/quantize.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "core/utf8.h"
#include "io/checkpoint_builder.h"
#include "io/json_lenient.h"
#include "io/mapped_file.h"
#include "mamba/checkpoint.h"
#include "mamba/weights.h"

namespace mamba {

namespace {

namespace fs = std::filesystem;

/// One tensor of the output file.
struct OutTensor {
  std::string name;
  const TensorEntry* src = nullptr;
  enum class Kind { kQuantCodes, kQuantScales, kF32, kKeep } kind = Kind::kF32;
  DType dtype = DType::kF32;  ///< stored dtype (I8/U8 for codes)
  Shape shape;                ///< stored shape
  std::uint64_t nbytes = 0;
  std::uint64_t offset = 0;   ///< within the data buffer
};

const char* st_dtype(DType t) {
  switch (t) {
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
    default: return dtype_name(t);  // F32 / BF16 / F16
  }
}

/// A failed fwrite / fclose of `shown` (the file's name in the final output directory, not the
/// temporary one): kIo with errno's reason (e.g. "No space left on device").
Status write_error(const std::string& shown) {
  const int e = errno;
  return make_error(ErrorCode::kIo, fmt::format("{}: write failed: {}", shown, e != 0 ? std::strerror(e) : "unknown error"));
}

/// Writes `t`'s bytes to `f`. Quantized codes are produced row by row (scales computed twice:
/// once with the codes, once for the scale tensor; cheap and keeps the writer streaming).
Status write_tensor(std::FILE* f, const OutTensor& t, QuantType type, const std::string& path) {
  const TensorView& v = t.src->view;
  auto put = [&](const void* p, std::size_t n) -> Status {
    if (n != 0 && std::fwrite(p, 1, n, f) != n) return write_error(path);
    return {};
  };
  if (t.kind == OutTensor::Kind::kKeep) return put(v.data, v.nbytes());
  if (t.kind == OutTensor::Kind::kF32) {
    std::vector<float> buf(static_cast<std::size_t>(v.numel()));
    convert_to_f32(v.data, v.dtype, buf.size(), buf.data());
    return put(buf.data(), buf.size() * 4);
  }
  const std::int64_t N = v.shape[0], K = v.shape[1], G = K / kQuantGroupSize;
  std::vector<float> row(static_cast<std::size_t>(K)), scales(static_cast<std::size_t>(G));
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(K));
  const std::size_t row_bytes = dtype_bytes(v.dtype, static_cast<std::size_t>(K));
  for (std::int64_t n = 0; n < N; ++n) {
    convert_to_f32(static_cast<const std::uint8_t*>(v.data) + n * row_bytes, v.dtype, row.size(), row.data());
    std::size_t code_bytes = static_cast<std::size_t>(K);
    Status st = type == QuantType::kQ8 ? quantize_row_q8(row.data(), K, reinterpret_cast<std::int8_t*>(codes.data()), scales.data())
                                       : quantize_row_q4(row.data(), K, codes.data(), scales.data());
    if (!st.ok()) return make_error(st.error().code, fmt::format("{}: tensor '{}' row {}: {}", t.src->file, t.src->name, n, st.message()));
    if (type == QuantType::kQ4) code_bytes /= 2;
    if (t.kind == OutTensor::Kind::kQuantCodes) {
      MAMBA_RETURN_IF_ERROR(put(codes.data(), code_bytes));
    } else {
      MAMBA_RETURN_IF_ERROR(put(scales.data(), scales.size() * 4));
    }
  }
  return {};
}

/// The output tensor list: bound tensors only (a tied lm_head stored once, as the embedding).
Result<std::vector<OutTensor>> plan(const Checkpoint& ck, const ModelWeights& w, QuantType type, QuantizeReport& rep) {
  std::set<const void*> bound, quantizable;
  auto add = [&](const TensorView& v, bool q) {
    if (v.empty()) return;
    bound.insert(v.data);
    if (q) quantizable.insert(v.data);
  };
  add(w.embedding, true);
  add(w.norm_f, false);
  add(w.lm_head, true);
  for (const auto& L : w.layers) {
    for (const TensorView* v : {&L.in_proj, &L.x_proj, &L.dt_proj, &L.out_proj}) add(*v, true);
    for (const TensorView* v : {&L.norm, &L.in_proj_bias, &L.conv1d_weight, &L.conv1d_bias, &L.out_proj_bias, &L.A_log, &L.D,
                                &L.dt_proj_bias, &L.dt_bias, &L.gated_norm})
      add(*v, false);
  }
  std::vector<OutTensor> out;
  std::set<const void*> done;
  for (const TensorEntry& e : ck.tensors()) {
    if (bound.count(e.view.data) == 0 || done.count(e.view.data) != 0) continue;
    if (ck.config().tie_embeddings && e.name == "lm_head.weight") continue;  // shares the embedding's storage
    done.insert(e.view.data);
    OutTensor t;
    t.name = e.name;
    t.src = &e;
    t.shape = e.view.shape;
    const bool q = quantizable.count(e.view.data) != 0;
    if (q && e.view.shape.rank == 2 && e.view.shape[1] % kQuantGroupSize == 0 && e.view.shape[1] > 0) {
      const std::int64_t N = e.view.shape[0], K = e.view.shape[1];
      t.kind = OutTensor::Kind::kQuantCodes;
      t.dtype = type == QuantType::kQ8 ? DType::kI8 : DType::kU8;
      t.shape = Shape{N, type == QuantType::kQ8 ? K : K / 2};
      OutTensor s;
      s.name = e.name + "_scale";
      s.src = &e;
      s.kind = OutTensor::Kind::kQuantScales;
      s.dtype = DType::kF32;
      s.shape = Shape{N, K / kQuantGroupSize};
      out.push_back(t);
      out.push_back(s);
      ++rep.quantized;
    } else if (q) {
      t.kind = OutTensor::Kind::kKeep;
      t.dtype = e.view.dtype;
      out.push_back(t);
      if (rep.kept < 3) rep.kept_names += (rep.kept_names.empty() ? "" : ", ") + e.name;
      ++rep.kept;
    } else {
      t.kind = OutTensor::Kind::kF32;
      t.dtype = DType::kF32;
      out.push_back(t);
      ++rep.f32;
    }
    rep.in_bytes += static_cast<std::int64_t>(e.view.nbytes());
  }
  for (auto& t : out) t.nbytes = dtype_bytes(t.dtype, static_cast<std::size_t>(t.shape.numel()));
  // Widest elements first: with an 8-byte-aligned header every tensor is aligned to its element size.
  std::stable_sort(out.begin(), out.end(), [](const OutTensor& a, const OutTensor& b) { return dtype_size(a.dtype) > dtype_size(b.dtype); });
  std::uint64_t off = 0;
  for (auto& t : out) {
    t.offset = off;
    off += t.nbytes;
  }
  return out;
}

/// Writes `path`; errors name `shown` (its name in the output directory).
Status write_safetensors(const std::string& path, const std::string& shown, const std::vector<OutTensor>& tensors, QuantType type,
                         std::int64_t* bytes) {
  nlohmann::ordered_json h;
  h["__metadata__"] = {{"format", "pt"},
                       {io::kQuantMetaType, type == QuantType::kQ8 ? "q8" : "q4"},
                       {io::kQuantMetaGroup, std::to_string(kQuantGroupSize)}};
  for (const auto& t : tensors) {
    std::vector<std::int64_t> shape(t.shape.dims.begin(), t.shape.dims.begin() + t.shape.rank);
    h[t.name] = {{"dtype", st_dtype(t.dtype)}, {"shape", shape}, {"data_offsets", {t.offset, t.offset + t.nbytes}}};
  }
  std::string header = h.dump();
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return make_error(ErrorCode::kIo, fmt::format("{}: cannot create: {}", shown, std::strerror(errno)));
  std::uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(header.size()) >> (8 * i));
  Status st;
  if (std::fwrite(len, 1, 8, f) != 8 || std::fwrite(header.data(), 1, header.size(), f) != header.size()) {
    st = write_error(shown);
  }
  for (const auto& t : tensors) {
    if (!st.ok()) break;
    st = write_tensor(f, t, type, shown);
  }
  errno = 0;
  if (std::fclose(f) != 0 && st.ok()) st = write_error(shown);
  std::error_code ec;
  *bytes = static_cast<std::int64_t>(fs::file_size(path, ec));
  return st;
}

Status write_config(const std::string& in_dir, const std::string& out_path, const std::string& shown, QuantType type) {
  const std::string src = (fs::path(in_dir) / "config.json").string();
  MAMBA_ASSIGN_OR_RETURN(std::string text, io::read_text_file(src));
  MAMBA_ASSIGN_OR_RETURN(nlohmann::json j, io::parse_json_lenient(text, src));
  j["quantization_config"] = {{"quant_method", "mamba.cpp"}, {"type", type == QuantType::kQ8 ? "q8" : "q4"}, {"group_size", kQuantGroupSize}};
  std::FILE* f = std::fopen(out_path.c_str(), "wb");
  if (f == nullptr) return make_error(ErrorCode::kIo, fmt::format("{}: cannot create: {}", shown, std::strerror(errno)));
  const std::string s = j.dump(2) + "\n";
  if (std::fwrite(s.data(), 1, s.size(), f) != s.size()) {
    const Status st = write_error(shown);
    std::fclose(f);
    return st;
  }
  errno = 0;
  if (std::fclose(f) != 0) return write_error(shown);
  return {};
}

/// Tokenizer and generation files travel with the weights.
constexpr const char* kSideFiles[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                                      "vocab.json",     "merges.txt",            "tokenizer.model",         "added_tokens.json"};

/// Copies `src` to `dst` byte for byte (a new file, mode 0666 less the umask: a read-only input — a
/// shared or cached model — still gives a copy its owner can edit, e.g. generation_config.json).
/// Errors name `src` for reads and `shown` (dst's name in the output directory) for writes, with
/// errno's reason (std::filesystem::copy_file reported a full disk as "Input/output error").
Status copy_file_to(const fs::path& src, const fs::path& dst, const std::string& shown) {
  std::FILE* in = std::fopen(src.c_str(), "rb");
  if (in == nullptr) return make_error(ErrorCode::kIo, fmt::format("{}: cannot read: {}", src.string(), std::strerror(errno)));
  std::FILE* out = std::fopen(dst.c_str(), "wb");
  if (out == nullptr) {
    const int e = errno;
    std::fclose(in);
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot create: {}", shown, std::strerror(e)));
  }
  Status st;
  std::vector<char> buf(1 << 16);
  for (;;) {
    const std::size_t n = std::fread(buf.data(), 1, buf.size(), in);
    if (n < buf.size() && std::ferror(in)) {
      st = make_error(ErrorCode::kIo, fmt::format("{}: read failed: {}", src.string(), std::strerror(errno)));
      break;
    }
    if (n != 0 && std::fwrite(buf.data(), 1, n, out) != n) {
      st = write_error(shown);
      break;
    }
    if (n < buf.size()) break;
  }
  std::fclose(in);
  errno = 0;
  if (std::fclose(out) != 0 && st.ok()) st = write_error(shown);
  return st;
}

Status copy_side_files(const std::string& in_dir, const std::string& out_dir, const fs::path& shown_dir) {
  for (const char* name : kSideFiles) {
    const fs::path src = fs::path(in_dir) / name;
    std::error_code ec;
    if (!fs::is_regular_file(src, ec)) continue;
    MAMBA_RETURN_IF_ERROR(copy_file_to(src, fs::path(out_dir) / name, (shown_dir / name).string()));
  }
  return {};
}

/// "dir/" → "dir" (the output's name is its last component).
fs::path without_trailing_slash(const std::string& out_dir) {
  fs::path out(out_dir);
  if (!out.has_filename()) out = out.parent_path();
  return out;
}

/// ".NAME.tmp-": the temporary directories' prefix. A NAME too long for the prefix and a PID to fit
/// a file name of 255 bytes (an output named with 250 bytes is legal) is cut at a UTF-8 character
/// boundary (at most 3 bytes back) and followed by 8 hex digits of a hash of the whole name, so
/// that two long names sharing their first bytes do not share a temporary directory.
std::string temp_prefix(const fs::path& out) {
  constexpr std::size_t kMaxName = 255 - 1 - 5 - 10;  // ".", ".tmp-", up to 10 PID digits
  std::string name = out.filename().string();
  if (name.size() > kMaxName) {
    const std::string hash = fmt::format("-{:08x}", static_cast<std::uint32_t>(std::hash<std::string>{}(name)));
    name.resize(utf8_cut(name, kMaxName - hash.size()));  // not inside a character
    name += hash;
  }
  return "." + name + ".tmp-";
}

/// Removes ".NAME.tmp-PID" siblings of `out` whose process no longer exists (a quantize killed by
/// SIGKILL, which no handler sees); a live PID's directory — another run in progress — is kept.

std::vector<std::string> remove_stale_temp_dirs(const fs::path& parent, const fs::path& out) {
  std::vector<std::string> removed;
  const std::string prefix = temp_prefix(out);
  std::error_code ec;
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::stol(digits);
    if (pid <= 0 || pid == ::getpid() || !(::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH)) continue;
    std::error_code rm;
    fs::remove_all(it->path(), rm);
    if (!rm) removed.push_back(it->path().string());
  }
  return removed;
}

}  // namespace

std::string quantize_temp_dir(const std::string& out_dir) {
  const fs::path out = without_trailing_slash(out_dir);
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  return (parent / fmt::format("{}{}", temp_prefix(out), ::getpid())).string();
}

std::vector<std::string> quantize_output_files() {
  std::vector<std::string> names = {"model.safetensors", "config.json"};
  for (const char* f : kSideFiles) names.emplace_back(f);
  return names;
}

Result<QuantizeReport> quantize_checkpoint(const std::string& in_dir, QuantType type, const std::string& out_dir) {
  if (type != QuantType::kQ8 && type != QuantType::kQ4)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("quantize: type = {}: expected QuantType kQ8 or kQ4", static_cast<int>(type)));
  std::error_code ec;
  if (out_dir.empty()) return make_error(ErrorCode::kInvalidArgument, "output directory: empty path");
  if (fs::exists(out_dir, ec) || fs::is_symlink(out_dir, ec)) {
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: already exists (choose a new output directory)", out_dir));
  }
  MAMBA_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(in_dir));
  if (!ck.config().quant_type.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: already quantized ({}); quantize the original bf16/f32 checkpoint instead", in_dir, ck.config().quant_type));
  }
  MAMBA_ASSIGN_OR_RETURN(ModelWeights w, bind_weights(ck));
  QuantizeReport rep;
  MAMBA_ASSIGN_OR_RETURN(std::vector<OutTensor> tensors, plan(ck, w, type, rep));
  if (rep.quantized == 0) {
    // The output would be the input relabelled q8/q4, with nothing smaller or faster.
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: nothing to quantize: no projection or embedding has K (its input width) a multiple of {} "
                                  "({} kept in their stored dtype: {}{}); nothing written",
                                  in_dir, kQuantGroupSize, rep.kept, rep.kept_names, rep.kept > 3 ? ", ..." : ""));
  }

  const fs::path out = without_trailing_slash(out_dir);
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  if (!fs::is_directory(parent, ec)) {
    return make_error(ErrorCode::kIo, fmt::format("{}: parent directory {} {}", out_dir, parent.string(),
                                                  fs::exists(parent, ec) ? "is not a directory" : "does not exist"));
  }
  rep.removed_stale = remove_stale_temp_dirs(parent, out);
  const fs::path tmp = quantize_temp_dir(out_dir);
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) {
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot create a directory in {}: {}", out_dir, parent.string(),
                                                  ec ? ec.message() : "unknown error"));
  }
  // Errors name the files as they would be in the output (the temporary directory is removed then).
  Status st = write_safetensors((tmp / "model.safetensors").string(), (out / "model.safetensors").string(), tensors, type,
                                &rep.out_bytes);
  if (st.ok()) st = write_config(in_dir, (tmp / "config.json").string(), (out / "config.json").string(), type);
  if (st.ok()) st = copy_side_files(in_dir, tmp.string(), out);
  if (st.ok() && (fs::exists(out, ec) || fs::is_symlink(out, ec))) {
    st = make_error(ErrorCode::kInvalidArgument, fmt::format("{}: appeared while quantizing; not overwritten", out_dir));
  }
  if (st.ok()) {
    fs::rename(tmp, out, ec);
    if (ec) st = make_error(ErrorCode::kIo, fmt::format("{}: cannot rename {} to it: {}", out_dir, tmp.string(), ec.message()));
  }
  if (!st.ok()) {
    std::error_code ec2;
    fs::remove_all(tmp, ec2);
    return st.error();
  }
  return rep;
}

}  // namespace mamba
