// Deterministic generators of varied text for tokenizer tests: code, CJK, emoji, whitespace
// runs, numbers, accents / combining marks, added-token markers and other edge cases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mamba::test {

/// `count` documents of generated text (valid UTF-8), each up to about `max_bytes` bytes,
/// reproducible from `seed`.
std::vector<std::string> generate_documents(std::uint64_t seed, int count, std::size_t max_bytes);

/// Splits `text` into documents of roughly `target_bytes` at line boundaries (UTF-8 safe).
std::vector<std::string> split_documents(const std::string& text, std::size_t target_bytes);

}  // namespace mamba::test
