// libFuzzer target: the restricted unpickler (io::parse_torch_pickle) and the zip directory reader
// (io::parse_zip_directory) of pytorch_model.bin. Inputs starting with "PK" go to the zip reader.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "io/torch_pickle.h"
#include "io/zip_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
    auto z = mamba::io::parse_zip_directory(data, size, "fuzz.bin");
    if (z.ok()) {
      for (const auto& e : z.value()) {
        if (e.data_offset > size || e.compressed_size > size - e.data_offset) std::abort();
      }
    }
    return 0;
  }
  auto r = mamba::io::parse_torch_pickle(data, size, "fuzz/data.pkl");
  if (!r.ok()) return 0;
  for (const auto& t : r.value()) {
    if (t.storage_offset < 0 || t.storage_offset + t.shape.numel() > t.storage_numel) std::abort();
  }
  return 0;
}
