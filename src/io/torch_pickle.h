// Restricted unpickler for torch.save(state_dict) archives (`pytorch_model.bin`, zip format).
//
// Understands only what torch.save writes for a state dict: protocol ≤ 5 opcodes for dicts, tuples,
// lists, strings, ints, floats, bools, None, memo, and the globals collections.OrderedDict,
// torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter and the storage types
// torch.FloatStorage / BFloat16Storage / HalfStorage (persistent ids
// ('storage', type, key, location, numel)). Any other global or opcode is an error naming it.
// Nothing is ever executed: REDUCE is interpreted for those globals only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mamba/status.h"
#include "mamba/tensor.h"

namespace mamba::io {

/// One tensor of the state dict: a contiguous window of a storage.
struct TorchTensorRecord {
  std::string name;           ///< state-dict key
  std::string storage_key;    ///< archive entry "<prefix>/data/<key>"
  DType dtype = DType::kF32;  ///< the storage's element type
  std::int64_t storage_offset = 0;  ///< in elements
  std::int64_t storage_numel = 0;   ///< elements the storage holds (from the persistent id)
  Shape shape;
};

/// Interprets the pickle `bytes[0, size)` (data.pkl). `source` prefixes errors.
/// Errors: kFormat (truncated, stack underflow, forbidden global, unknown opcode, bad tensor
/// arguments), kUnsupported (non-contiguous tensors, rank > 4, other storage dtypes).
Result<std::vector<TorchTensorRecord>> parse_torch_pickle(const std::uint8_t* bytes, std::size_t size,
                                                          const std::string& source);

}  // namespace mamba::io
