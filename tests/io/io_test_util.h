// Helpers shared by the io tests: fixture paths, bound-weight comparison, temp directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "mamba/weights.h"

namespace mamba::test {

/// A fresh empty directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  /// Writes `bytes` to path()/rel (creating parent directories) and returns the full path.
  std::string write(const std::string& rel, const std::string& bytes) const;

 private:
  std::string path_;
};

/// All views of `w` with a label ("layers.0.in_proj", ...), empty ones included.
std::vector<std::pair<std::string, TensorView>> all_views(const ModelWeights& w);

/// Bytes of a contiguous view.
std::string view_bytes(const TensorView& v);

/// A minimal safetensors file: tensors given as (name, dtype string, shape, raw bytes).
struct StTensor {
  std::string name, dtype;
  std::vector<std::int64_t> shape;
  std::string bytes;
};
std::string make_safetensors(const std::vector<StTensor>& tensors);

/// A zip archive of stored (uncompressed) entries, as torch.save writes them (CRCs left 0).
/// With `zip64`, every size and offset goes through zip64 extra fields and the zip64 end records,
/// as writers do for archives over 4 GiB (e.g. a 2.8b fp32 pytorch_model.bin).
std::string make_zip(const std::vector<std::pair<std::string, std::string>>& entries, bool zip64 = false);

/// Little-endian bytes of an integer.
std::string le(std::uint64_t v, int nbytes);

}  // namespace mamba::test
