// libFuzzer target: config.json parsing (lenient Python-json floats, both formats, derived sizes).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "mamba/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto r = mamba::ModelConfig::from_json_text(text, "fuzz/config.json");
  if (!r.ok()) return 0;
  const mamba::ModelConfig& c = r.value();
  // Derived sizes of an accepted config are positive and do not overflow.
  if (c.padded_vocab_size() < c.vocab_size || c.conv_channels() <= 0 || c.in_proj_rows() <= 0 || c.state_bytes() <= 0) std::abort();
  return 0;
}
