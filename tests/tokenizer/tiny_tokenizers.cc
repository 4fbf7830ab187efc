#include "tokenizer/tiny_tokenizers.h"

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace mamba::test {

using nlohmann::json;

std::string tiny_byte_level_json() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(tok::byte_to_char_utf8(static_cast<std::uint8_t>(b)))] = b;
  const char* merges[][2] = {{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"in", "g"}};
  json m = json::array();
  int next = 256;
  for (auto& p : merges) {
    m.push_back({p[0], p[1]});
    vocab[std::string(p[0]) + p[1]] = next++;
  }
  json added = json::array({
      {{"id", next}, {"content", "<|endoftext|>"}, {"special", true}, {"normalized", false}, {"lstrip", false}, {"rstrip", false}, {"single_word", false}},
      {{"id", next + 1}, {"content", "  "}, {"special", false}, {"normalized", true}, {"lstrip", false}, {"rstrip", false}, {"single_word", false}},
  });
  json t = {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", {{"type", "NFC"}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
            {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}}},
            {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}}}};
  return t.dump();
}

std::string tiny_metaspace_json() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  int next = 3;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    vocab[buf] = next++;
  }
  vocab["\u2581"] = next++;
  for (char c = 'a'; c <= 'z'; ++c) vocab[std::string(1, c)] = next++;
  vocab["\u2581a"] = next++;
  vocab["ab"] = next++;
  json added = json::array();
  for (int k = 0; k < 3; ++k) {
    added.push_back({{"id", k}, {"content", k == 0 ? "<unk>" : k == 1 ? "<s>" : "</s>"}, {"special", true}, {"normalized", false},
                     {"lstrip", false}, {"rstrip", false}, {"single_word", false}});
  }
  json t = {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", true}}},
            {"post_processor",
             {{"type", "TemplateProcessing"},
              {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
              {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
            {"decoder",
             {{"type", "Sequence"},
              {"decoders", json::array({{{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "first"}, {"split", true}},
                                        {{"type", "ByteFallback"}},
                                        {{"type", "Fuse"}}})}}},
            {"model",
             {{"type", "BPE"}, {"byte_fallback", true}, {"fuse_unk", true}, {"unk_token", "<unk>"}, {"vocab", vocab},
              {"merges", json::array({json::array({"\u2581", "a"}), json::array({"a", "b"})})}}}};
  return t.dump();
}

}  // namespace mamba::test
