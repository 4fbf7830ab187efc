// Internal: how each weight-file format adds its tensors to a Checkpoint under construction.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/mapped_file.h"
#include "mamba/checkpoint.h"

namespace mamba::io {

/// Accumulates tensors (views into mappings or owned copies) and keeps their storage alive.
struct CheckpointContents {
  std::vector<TensorEntry> tensors;                     ///< file order
  std::unordered_map<std::string, std::size_t> index;   ///< name → position in tensors
  std::vector<std::shared_ptr<MappedFile>> mappings;    ///< keep the mmapped files alive
  std::vector<std::unique_ptr<std::uint8_t[]>> copies;  ///< owned buffers (misaligned data copied)
  std::size_t weight_bytes = 0;

  /// Adds a tensor whose bytes are [data, data + nbytes) inside a mapping (or a copy) owned here.
  /// Misaligned data (address not a multiple of the element size) is copied into an owned buffer.
  /// Errors: kFormat on a duplicate name.
  Status add(const std::string& name, DType dtype, const Shape& shape, const std::uint8_t* data, const std::string& file);
};

/// Adds the tensors of one safetensors file (`path`), mmapped (misaligned tensors copied).
Status add_safetensors_file(const std::string& path, CheckpointContents& out);

/// Adds the tensors of a torch.save zip archive (`pytorch_model.bin`), mmapped in place.
Status add_torch_zip_file(const std::string& path, CheckpointContents& out);

}  // namespace mamba::io
