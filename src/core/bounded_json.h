// JSON text → nlohmann DOM with a bound on nesting, for every JSON this project reads from outside
// (request bodies, config.json, tokenizer.json, safetensors headers).
//
// nlohmann's parser builds a DOM of any depth without recursion, but dumping, copying or comparing a
// value recurses once per level: a 200 KB request body of 100 000 nested arrays overflowed a server
// worker's stack in an error message's dump, and a config.json of nested arrays crashed `inspect`
// the same way. No file or request this project reads nests deeper than a few levels.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mamba {

/// Default bound on nesting: the top-level value is level 1 (the deepest containers of an OpenAI
/// request, messages[i].content[j].image_url, are at level 6; tokenizer.json's at about as deep).
inline constexpr int kMaxJsonDepth = 256;

/// Why parse_json_bounded refused its text.
struct JsonParseFault {
  bool too_deep = false;  ///< nesting past the bound (else a syntax or UTF-8 error)
  /// nlohmann's message without its "[json.exception.parse_error.101] " tag ("parse error at line
  /// 1, column 7: syntax error while parsing value - …"), or "arrays and objects nested more than
  /// N levels deep".
  std::string message;
};

/// Parses `text` (one JSON value, strict RFC 8259 as json::parse: UTF-8 checked, no comments, no
/// trailing bytes) into `out`, refusing arrays and objects nested more than `max_depth` levels.
/// When `repeated_top_key` is given, it receives the first key the top-level object names twice
/// (nlohmann keeps the last silently). Not a parser callback: with one, nlohmann 3.11 walks the parent's
/// members at every member object's end (O(n²) in a header of n tensors, or a body of n objects).
/// On error `out` is unspecified. Throws only std::bad_alloc.
std::optional<JsonParseFault> parse_json_bounded(std::string_view text, nlohmann::json& out, int max_depth = kMaxJsonDepth,
                                                 std::optional<std::string>* repeated_top_key = nullptr);

}  // namespace mamba
