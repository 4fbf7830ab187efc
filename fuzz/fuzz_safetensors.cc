// libFuzzer target: safetensors header parsing and validation from memory (io::parse_safetensors).
// Invariant checked: every accepted record lies inside the buffer and spans numel × dtype bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto r = mamba::io::parse_safetensors(data, size, "fuzz.safetensors");
  if (!r.ok()) return 0;
  for (const auto& rec : r.value()) {
    if (rec.end > size || rec.begin > rec.end) std::abort();
    if (mamba::dtype_bytes(rec.dtype, static_cast<std::size_t>(rec.shape.numel())) != rec.end - rec.begin) std::abort();
    // Touch the first and last byte: must be readable.
    if (rec.end > rec.begin) {
      volatile std::uint8_t a = data[rec.begin], b = data[rec.end - 1];
      (void)a;
      (void)b;
    }
  }
  return 0;
}
