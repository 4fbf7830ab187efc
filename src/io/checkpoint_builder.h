// Internal: how each weight-file format adds its tensors to a Checkpoint under construction.
#pragma once

#include <map>
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
  /// Each safetensors file's "__metadata__" (path, map), in load order.
  std::vector<std::pair<std::string, std::map<std::string, std::string>>> file_metadata;

  /// Adds a tensor whose bytes are [data, data + nbytes) inside a mapping (or a copy) owned here.
  /// Misaligned data (address not a multiple of the element size) is copied into an owned buffer.
  /// Errors: kFormat on a duplicate name.
  Status add(const std::string& name, DType dtype, const Shape& shape, const std::uint8_t* data, const std::string& file);
};

/// Adds the tensors of one safetensors file (`path`), mmapped (misaligned tensors copied).
Status add_safetensors_file(const std::string& path, CheckpointContents& out);

/// Quantized checkpoints (config.quant_type set; layout in README §"Quantized weights"): replaces
/// each codes tensor `X` (I8 [N, K] for q8, U8 [N, K/2] for q4) and its companion `X_scale`
/// (F32 [N, K/32]) by one entry `X` of dtype kQ8/kQ4, logical shape [N, K], carrying the scales.
/// Checks the safetensors metadata agrees with config.json, every code/scale shape and dtype, and
/// that no code tensor lacks its scale (or a scale its codes). Errors name file, tensor, expected
/// and actual. A checkpoint whose metadata says quantized but whose config does not → kFormat.
Status fuse_quantized(CheckpointContents& c, const ModelConfig& config, const std::string& dir);

/// Safetensors __metadata__ keys marking a mamba.cpp quantized file.
inline constexpr const char* kQuantMetaType = "mamba.cpp.quantization";   ///< "q8" | "q4"
inline constexpr const char* kQuantMetaGroup = "mamba.cpp.group_size";    ///< "32"

/// Adds the tensors of a torch.save zip archive (`pytorch_model.bin`), mmapped in place.
Status add_torch_zip_file(const std::string& path, CheckpointContents& out);

}  // namespace mamba::io
