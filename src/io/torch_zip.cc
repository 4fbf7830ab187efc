// pytorch_model.bin (torch.save zip archive): data.pkl interpreted by the restricted unpickler,
// tensors viewed in place inside the stored (uncompressed) data/<key> entries of the mapping.
#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <unordered_map>

#include "io/checked_math.h"
#include "io/checkpoint_builder.h"
#include "io/torch_pickle.h"
#include "io/zip_reader.h"

namespace mamba::io {

Status add_torch_zip_file(const std::string& path, CheckpointContents& out) {
  MAMBA_ASSIGN_OR_RETURN(auto map, MappedFile::open(path));
  if (map->size() >= 2 && map->data()[0] == 0x80) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: legacy (pre-1.6, non-zip) torch.save format is not supported; re-save it with a current torch or convert to safetensors", path));
  }
  MAMBA_ASSIGN_OR_RETURN(auto entries, parse_zip_directory(map->data(), map->size(), path));
  std::unordered_map<std::string, const ZipEntry*> by_name;
  const ZipEntry* pkl = nullptr;
  for (const auto& e : entries) {
    by_name[e.name] = &e;
    const std::string suffix = "data.pkl";
    if (e.name.size() >= suffix.size() && e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        (e.name.size() == suffix.size() || e.name[e.name.size() - suffix.size() - 1] == '/') &&
        (pkl == nullptr || e.name.size() < pkl->name.size())) {
      pkl = &e;
    }
  }
  if (pkl == nullptr) return make_error(ErrorCode::kFormat, fmt::format("{}: zip archive has no data.pkl entry (not a torch.save file)", path));
  if (pkl->method != 0) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: entry '{}' is compressed (method {}); only stored entries are supported, as torch.save writes them", path, pkl->name, pkl->method));
  }
  const std::string prefix = pkl->name.substr(0, pkl->name.size() - 8);  // "archive/" or ""
  // Storages are raw little-endian element arrays; torch records the writer's byte order.
  if (auto bo = by_name.find(prefix + "byteorder"); bo != by_name.end() && bo->second->method == 0) {
    const std::string order(reinterpret_cast<const char*>(map->data() + bo->second->data_offset), static_cast<std::size_t>(std::min<std::uint64_t>(bo->second->size, 16)));
    if (order != "little") {
      return make_error(ErrorCode::kUnsupported, fmt::format("{}: storages were written with byte order \"{}\"; only little-endian is supported", path, order));
    }
  }
  MAMBA_ASSIGN_OR_RETURN(auto records, parse_torch_pickle(map->data() + pkl->data_offset, static_cast<std::size_t>(pkl->size), path + ": " + pkl->name));
  // Storage base addresses: in place when aligned for the element type, else one owned copy per
  // storage (so tensors sharing a storage, e.g. a tied lm_head, still share memory).
  std::unordered_map<std::string, const std::uint8_t*> storage_base;
  for (const auto& r : records) {
    const std::string entry_name = prefix + "data/" + r.storage_key;
    auto it = by_name.find(entry_name);
    if (it == by_name.end()) {
      return make_error(ErrorCode::kNotFound, fmt::format("{}: tensor '{}': storage entry '{}' is missing from the archive", path, r.name, entry_name));
    }
    const ZipEntry& z = *it->second;
    if (z.method != 0) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: storage entry '{}' is compressed (method {}); only stored entries are supported, as torch.save writes them", path, z.name, z.method));
    }
    const std::uint64_t esize = dtype_size(r.dtype);
    std::uint64_t storage_bytes = 0;
    if (!checked_mul(static_cast<std::uint64_t>(r.storage_numel), esize, &storage_bytes) || storage_bytes > z.size) {
      return make_error(ErrorCode::kFormat,
                        fmt::format("{}: tensor '{}': storage '{}' declares {} {} elements ({} bytes) but the entry holds {} bytes", path, r.name,
                                    z.name, r.storage_numel, dtype_name(r.dtype), r.storage_numel * static_cast<std::int64_t>(esize), z.size));
    }
    auto [base_it, fresh] = storage_base.emplace(r.storage_key, map->data() + z.data_offset);
    if (fresh && esize > 1 && reinterpret_cast<std::uintptr_t>(base_it->second) % esize != 0 && z.size > 0) {
      // The whole entry: every tensor of this storage was checked against z.size.
      auto buf = std::make_unique<std::uint8_t[]>(static_cast<std::size_t>(z.size));
      std::memcpy(buf.get(), base_it->second, static_cast<std::size_t>(z.size));
      base_it->second = buf.get();
      out.copies.push_back(std::move(buf));
    }
    const std::uint8_t* data = base_it->second + static_cast<std::uint64_t>(r.storage_offset) * esize;
    MAMBA_RETURN_IF_ERROR(out.add(r.name, r.dtype, r.shape, data, path));
  }
  out.mappings.push_back(std::move(map));
  return {};
}

}  // namespace mamba::io
