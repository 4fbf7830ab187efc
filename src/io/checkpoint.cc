// Checkpoint: config.json + weight files of one model directory, mapped read-only.
#include "mamba/checkpoint.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "io/checkpoint_builder.h"
#include "io/generation_config.h"
#include "io/json_lenient.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"

namespace mamba {

namespace io {

Status CheckpointContents::add(const std::string& name, DType dtype, const Shape& shape, const std::uint8_t* data,
                               const std::string& file) {
  if (index.count(name) != 0) {
    const auto& prev = tensors[index[name]];
    return make_error(ErrorCode::kFormat, fmt::format("{}: tensor '{}' is defined twice (also in {})", file, name, prev.file));
  }
  const std::size_t nbytes = dtype_bytes(dtype, static_cast<std::size_t>(shape.numel()));
  const std::size_t align = std::max<std::size_t>(1, dtype_size(dtype));
  const std::uint8_t* p = data;
  if (nbytes > 0 && reinterpret_cast<std::uintptr_t>(data) % align != 0) {
    auto buf = std::make_unique<std::uint8_t[]>(nbytes);  // new[] is aligned for any scalar type
    std::memcpy(buf.get(), data, nbytes);
    p = buf.get();
    copies.push_back(std::move(buf));
  }
  TensorEntry e;
  e.name = name;
  e.view = TensorView(const_cast<std::uint8_t*>(p), dtype, shape);
  e.file = file;
  index.emplace(name, tensors.size());
  tensors.push_back(std::move(e));
  weight_bytes += nbytes;
  return {};
}

Status add_safetensors_file(const std::string& path, CheckpointContents& out) {
  MAMBA_ASSIGN_OR_RETURN(auto map, MappedFile::open(path));
  std::map<std::string, std::string> meta;
  MAMBA_ASSIGN_OR_RETURN(auto recs, parse_safetensors(map->data(), map->size(), path, &meta));
  out.file_metadata.emplace_back(path, std::move(meta));
  for (const auto& r : recs) {
    MAMBA_RETURN_IF_ERROR(out.add(r.name, r.dtype, r.shape, map->data() + r.begin, path));
  }
  out.mappings.push_back(std::move(map));
  return {};
}

namespace {

using AddFile = Status (*)(const std::string& path, CheckpointContents& out);

// model.safetensors.index.json / pytorch_model.bin.index.json → the shard files, each checked to
// hold every tensor the index lists for it.
Status add_sharded(const std::string& dir, const std::string& index_path, AddFile add_file, CheckpointContents& out) {
  namespace fs = std::filesystem;
  MAMBA_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
  MAMBA_ASSIGN_OR_RETURN(nlohmann::json j, parse_json_lenient(text, index_path));
  auto wm = j.is_object() ? j.find("weight_map") : j.end();
  if (!j.is_object() || wm == j.end() || !wm->is_object()) {
    return make_error(ErrorCode::kFormat, fmt::format("{}: missing \"weight_map\" object", index_path));
  }
  std::map<std::string, std::vector<std::string>> by_file;  // shard → tensor names (sorted: deterministic order)
  std::vector<std::string> shard_order;
  for (auto it = wm->begin(); it != wm->end(); ++it) {
    if (!it->is_string()) return make_error(ErrorCode::kFormat, fmt::format("{}: weight_map[\"{}\"] is not a file name", index_path, it.key()));
    std::string f = it->get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f.find("..") != std::string::npos) {
      return make_error(ErrorCode::kFormat, fmt::format("{}: weight_map[\"{}\"] = \"{}\" is not a plain file name in the model directory", index_path, it.key(), f));
    }
    if (by_file.find(f) == by_file.end()) shard_order.push_back(f);
    by_file[f].push_back(it.key());
  }
  std::sort(shard_order.begin(), shard_order.end());
  for (const auto& f : shard_order) {
    const std::string path = (fs::path(dir) / f).string();
    MAMBA_RETURN_IF_ERROR(add_file(path, out));
    for (const auto& name : by_file[f]) {
      auto it = out.index.find(name);
      if (it == out.index.end() || out.tensors[it->second].file != path) {
        return make_error(ErrorCode::kNotFound, fmt::format("{}: tensor '{}' is listed in {} but not stored in that shard", path, name, index_path));
      }
    }
  }
  return {};
}

}  // namespace
}  // namespace io

struct Checkpoint::Impl {
  std::string dir;
  ModelConfig config;
  io::CheckpointContents contents;
  Result<std::optional<std::vector<std::int32_t>>> generation_eos_ids = std::optional<std::vector<std::int32_t>>();
  Result<std::optional<std::string>> tokenizer_eos_token = std::optional<std::string>();
};

Checkpoint::Checkpoint() : impl_(std::make_unique<Impl>()) {}
Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

const std::string& Checkpoint::dir() const { return impl_->dir; }
const ModelConfig& Checkpoint::config() const { return impl_->config; }
ModelConfig& Checkpoint::mutable_config() { return impl_->config; }
const std::vector<TensorEntry>& Checkpoint::tensors() const { return impl_->contents.tensors; }
const Result<std::optional<std::vector<std::int32_t>>>& Checkpoint::generation_eos_ids() const { return impl_->generation_eos_ids; }
const Result<std::optional<std::string>>& Checkpoint::tokenizer_eos_token() const { return impl_->tokenizer_eos_token; }
std::size_t Checkpoint::weight_bytes() const { return impl_->contents.weight_bytes; }

void Checkpoint::release_pages(const void* p, std::size_t n) const {
  const auto b = reinterpret_cast<std::uintptr_t>(p), e = b + n;
  for (const auto& m : impl_->contents.mappings) {
    const auto mb = reinterpret_cast<std::uintptr_t>(m->data()), me = mb + m->size();
    if (b < mb || e > me) continue;
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    const std::uintptr_t begin = (b + page - 1) / page * page, end = e / page * page;
    if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    return;
  }
}

const TensorEntry* Checkpoint::find(const std::string& name) const {
  auto it = impl_->contents.index.find(name);
  return it == impl_->contents.index.end() ? nullptr : &impl_->contents.tensors[it->second];
}

namespace {
/// has_model_file; `role` names what the entry should be in the directory error ("weights file").
Result<bool> probe_model_file(const std::string& dir, const std::string& name, const char* role) {
  namespace fs = std::filesystem;
  const fs::path p = fs::path(dir) / name;
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(p, ec);
  if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)  // e.g. EACCES on dir
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot read: {}", p.string(), ec.message()));
  if (link.type() == fs::file_type::not_found || link.type() == fs::file_type::none) return false;
  const fs::file_status st = fs::status(p, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)  // e.g. a link loop: "Too many levels of symbolic links"
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot read: {}", p.string(), ec.message()));
  if (st.type() == fs::file_type::not_found) {
    if (auto dangling = io::dangling_link_error(p.string())) return *dangling;
    return make_error(ErrorCode::kNotFound, fmt::format("{}: no such file", p.string()));
  }
  if (st.type() != fs::file_type::regular)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: {}", p.string(), st.type() == fs::file_type::directory ? fmt::format("is a directory, not a {}", role) : std::string("is not a regular file")));
  if (::access(p.c_str(), R_OK) != 0)
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot read: {}", p.string(), std::strerror(errno)));
  return true;
}
}  // namespace

Result<bool> has_model_file(const std::string& dir, const std::string& name) { return probe_model_file(dir, name, "file"); }

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (dir.empty()) return make_error(ErrorCode::kInvalidArgument, "empty model directory path (expected a model directory with config.json)");
  if (!fs::is_directory(dir, ec)) {
    return make_error(ErrorCode::kNotFound, fmt::format("{}: not a directory (expected a model directory with config.json)", dir));
  }
  Checkpoint ck;
  ck.impl_->dir = dir;
  const fs::path d(dir);
  MAMBA_ASSIGN_OR_RETURN(ck.impl_->config, ModelConfig::from_file((d / "config.json").string()));
  auto& contents = ck.impl_->contents;
  // transformers' order (modeling_utils: model.safetensors, its index, pytorch_model.bin, its
  // index). The first entry that exists is read; one that exists but is no readable file (a
  // dangling link, a directory) is named, never skipped for the next format.
  using AddFile = Status (*)(const std::string&, io::CheckpointContents&);
  struct Candidate { const char* name; bool sharded; AddFile add; };
  const Candidate candidates[] = {{"model.safetensors", false, io::add_safetensors_file},
                                  {"model.safetensors.index.json", true, io::add_safetensors_file},
                                  {"pytorch_model.bin", false, io::add_torch_zip_file},
                                  {"pytorch_model.bin.index.json", true, io::add_torch_zip_file}};
  bool found = false;
  for (const Candidate& c : candidates) {
    MAMBA_ASSIGN_OR_RETURN(found, probe_model_file(dir, c.name, "weights file"));
    if (!found) continue;
    const std::string path = (d / c.name).string();
    if (c.sharded) MAMBA_RETURN_IF_ERROR(io::add_sharded(dir, path, c.add, contents));
    else MAMBA_RETURN_IF_ERROR(c.add(path, contents));
    break;
  }
  if (!found)
    return make_error(ErrorCode::kNotFound,
                      fmt::format("{}: no weights found (looked for model.safetensors, model.safetensors.index.json, pytorch_model.bin, "
                                  "pytorch_model.bin.index.json)", dir));
  MAMBA_RETURN_IF_ERROR(io::fuse_quantized(contents, ck.impl_->config, dir));
  // Read once here, as transformers' from_pretrained loads its GenerationConfig (and the tokenizer
  // its tokenizer_config.json): later edits of the files do not change a loaded model. Their errors
  // are kept for the first generation to report (a checkpoint is still usable for quantize /
  // inspect / prefill with a broken generation_config.json or tokenizer_config.json).
  ck.impl_->generation_eos_ids = io::read_generation_eos_ids(dir, ck.impl_->config.vocab_size);
  ck.impl_->tokenizer_eos_token = io::read_tokenizer_eos_token(dir);
  return ck;
}

}  // namespace mamba
