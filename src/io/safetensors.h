// Safetensors: header parsing (from memory, for files and fuzzers) and the per-file tensor table.
//
// Format (huggingface/safetensors): u64 little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data buffer; offsets are relative to the start of the data buffer (byte 8 + N).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mamba/status.h"
#include "mamba/tensor.h"

namespace mamba::io {

/// One tensor record of a safetensors header, validated against the file size.
struct SafetensorsRecord {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  std::uint64_t begin = 0;  ///< absolute byte offset in the file (header included)
  std::uint64_t end = 0;    ///< absolute, exclusive
};

/// Maps a safetensors dtype string ("F32", "BF16", ...) to DType; false if unknown.
bool safetensors_dtype(const std::string& s, DType* out);

/// Parses and validates the header of a whole safetensors file held in `bytes[0, size)`.
/// Checks: header length within the file, JSON object, each record's dtype known, shape rank ≤ 4
/// with non-negative dims, numel·dtype size (overflow-checked) == end − begin, offsets inside the
/// data buffer, no two records overlapping. Records are returned sorted by offset (file order).
/// `source` (a path) prefixes every error. Errors: kFormat (malformed), kUnsupported (dtype/rank).
/// `metadata` (optional): receives the "__metadata__" string map (must be an object of strings).
Result<std::vector<SafetensorsRecord>> parse_safetensors(const std::uint8_t* bytes, std::size_t size,
                                                         const std::string& source,
                                                         std::map<std::string, std::string>* metadata = nullptr);

}  // namespace mamba::io
