// libFuzzer target: tokenizer encode / decode / StreamDecoder on built-in pipelines, and
// tokenizer.json loading. The first input byte selects the mode:
//   0, 1: encode the rest with a byte-level pipeline (0: Falcon-like Sequence of Punctuation,
//         ByteLevel, Digits, Split regex with single_word / normalized added tokens; 1: GPT-2
//         ByteLevel + NFKC, lstrip/rstrip added token, BOS template); valid UTF-8 must encode, decode must give the text back (mode 0,
//         which has no normalizer) and StreamDecoder must reproduce decode.
//   2:    encode with a Mistral-legacy pipeline (Prepend/Replace normalizer, byte-fallback BPE,
//         Replace/ByteFallback/Fuse/Strip decoder).
//   3:    the rest is a tokenizer.json; when it loads, encode and decode a fixed text.
//   4:    the rest is a list of 16-bit ids for decode, token_text / token_bytes and StreamDecoder
//         (alone, and continuing its first third as context) on every pipeline.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mamba/tokenizer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace {

using nlohmann::json;

json added(int id, const char* content, bool special, bool normalized, bool lstrip = false, bool rstrip = false, bool single = false) {
  return {{"id", id}, {"content", content}, {"special", special}, {"normalized", normalized},
          {"lstrip", lstrip}, {"rstrip", rstrip}, {"single_word", single}};
}

json byte_level_model() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[std::string(mamba::tok::byte_to_char_utf8(static_cast<std::uint8_t>(b)))] = b;
  const char* merges[][2] = {{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"in", "g"}, {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}, {"1", "2"}};
  json m = json::array();
  int next = 256;
  for (auto& p : merges) {
    m.push_back({p[0], p[1]});
    vocab[std::string(p[0]) + p[1]] = next++;
  }
  return {{"type", "BPE"}, {"vocab", vocab}, {"merges", m}, {"ignore_merges", false}};
}

std::string falcon_like() {
  json t = {{"added_tokens", json::array({added(300, "<s>", true, false), added(301, "<|im_end|>", true, false),
                                          added(302, "MASK", false, false, false, false, true), added(303, "ab", false, true)})},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", json::array({
                {{"type", "Punctuation"}, {"behavior", "Contiguous"}},
                {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}},
                {{"type", "Digits"}, {"individual_digits", false}},
                {{"type", "Split"}, {"pattern", {{"Regex", "[0-9][0-9][0-9]"}}}, {"behavior", "Isolated"}, {"invert", false}}})}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", byte_level_model()}};
  return t.dump();
}

std::string gpt2_nfkc() {
  json t = {{"added_tokens", json::array({added(300, "<|endoftext|>", true, false), added(301, "  ", false, true),
                                          added(302, "<|im_end|>", true, false, true, true)})},
            {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFKC"}},
                {{"type", "Replace"}, {"pattern", {{"Regex", "\\r\\n"}}}, {"content", "\n"}}})}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}}},
            {"post_processor", {{"type", "TemplateProcessing"}, {"single", json::array({{{"SpecialToken", {{"id", "<|endoftext|>"}}}}, {{"Sequence", {{"id", "A"}}}}})},
                                {"special_tokens", {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {300}}}}}}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", byte_level_model()}};
  t["model"]["ignore_merges"] = true;
  return t.dump();
}

std::string mistral_legacy() {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  int next = 3;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    vocab[buf] = next++;
  }
  for (const char* s : {"\u2581", "a", "b", "c", "\u2581a", "ab", "\u2581ab", "\u00e9"}) vocab[s] = next++;
  json t = {{"added_tokens", json::array({added(0, "<unk>", true, false), added(1, "<s>", true, false), added(2, "</s>", true, false)})},
            {"normalizer", {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", "\u2581"}},
                {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}})}}},
            {"pre_tokenizer", nullptr},
            {"decoder", {{"type", "Sequence"}, {"decoders", json::array({
                {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                {{"type", "ByteFallback"}}, {{"type", "Fuse"}}, {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
            {"model", {{"type", "BPE"}, {"byte_fallback", true}, {"fuse_unk", true}, {"unk_token", "<unk>"}, {"vocab", vocab},
                       {"merges", json::array({json::array({"\u2581", "a"}), json::array({"a", "b"}), json::array({"\u2581a", "b"})})}}}};
  return t.dump();
}

const std::vector<mamba::Tokenizer>& pipelines() {
  static const std::vector<mamba::Tokenizer> toks = [] {
    std::vector<mamba::Tokenizer> v;
    for (const std::string& j : {falcon_like(), gpt2_nfkc(), mistral_legacy()}) {
      auto t = mamba::Tokenizer::from_json_text(j, "fuzz-pipeline.json");
      if (!t.ok()) {
        std::fprintf(stderr, "built-in pipeline failed to load: %s\n", t.error().message.c_str());
        std::abort();
      }
      v.push_back(std::move(t).value());
    }
    return v;
  }();
  return toks;
}

/// The pieces of a StreamDecoder over `ids` (after `context`), each checked to be valid UTF-8.
std::string stream(const mamba::Tokenizer& tok, const std::vector<std::int32_t>& ids, bool skip,
                   const std::vector<std::int32_t>& context = {}) {
  mamba::StreamDecoder sd(tok, skip, context);
  std::string out;
  for (std::int32_t id : ids) {
    auto piece = sd.push(id);
    if (!piece.ok() || mamba::tok::utf8_valid_prefix(*piece) != piece->size()) std::abort();
    out += *piece;
  }
  return out + sd.flush();
}

void check_stream(const mamba::Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  auto full = tok.decode(ids);
  if (!full.ok()) std::abort();
  if (stream(tok, ids, false) != *full) std::abort();
  // Skipping special tokens, a byte-fallback run may continue across one (its released text is then
  // kept, where decode reads the whole run as invalid): equal wherever decode has no U+FFFD.
  const std::string skipped = *tok.decode(ids, true), streamed_skipped = stream(tok, ids, true);
  if (skipped.find("\xEF\xBF\xBD") == std::string::npos && streamed_skipped != skipped) std::abort();
  // Each id's own text / bytes.
  for (std::int32_t id : ids) {
    auto text = tok.token_text(id);
    if (!text.ok() || !tok.token_bytes(id).ok() || mamba::tok::utf8_valid_prefix(*text) != text->size()) std::abort();
  }
  // With the first third as context (a prompt): the rest's text after the context's last ids, or
  // decode(rest) when the context is not used (it ends inside a character).
  const std::size_t k = ids.size() / 3;
  const std::vector<std::int32_t> context(ids.begin(), ids.begin() + k), rest(ids.begin() + k, ids.end());
  const std::string after = stream(tok, rest, false, context);
  bool as_continuation = false;
  for (std::size_t n = 0; n <= std::min<std::size_t>(4, context.size()) && !as_continuation; ++n) {
    for (std::size_t cut = 0; cut <= n && !as_continuation; ++cut) {  // the last n ids, less a trailing run
      const std::vector<std::int32_t> tail(context.end() - n, context.end() - cut);
      std::vector<std::int32_t> tail_rest = tail;
      tail_rest.insert(tail_rest.end(), rest.begin(), rest.end());
      const std::string t = *tok.decode(tail), tr = *tok.decode(tail_rest);
      as_continuation = tr.compare(0, t.size(), t) == 0 && after == tr.substr(t.size());
    }
  }
  if (!as_continuation && after != *tok.decode(rest)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto& toks = pipelines();
  const int mode = data[0] % 5;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode <= 2) {
    const mamba::Tokenizer& tok = toks[static_cast<std::size_t>(mode)];
    auto ids = tok.encode(rest, mode == 1);
    const bool valid = mamba::tok::utf8_valid_prefix(rest) == rest.size();
    if (ids.ok() != valid) std::abort();
    if (!ids.ok()) return 0;
    for (std::int32_t id : *ids) {
      if (id < 0 || id >= tok.size()) std::abort();
    }
    auto text = tok.decode(*ids);
    if (!text.ok()) std::abort();
    if (mode == 0 && *text != rest) std::abort();  // byte-level without normalizer round-trips
    check_stream(tok, *ids);
  } else if (mode == 3) {
    auto tok = mamba::Tokenizer::from_json_text(rest, "fuzz.json");
    if (!tok.ok()) return 0;
    auto ids = tok->encode("Hello w\xC3\xB6rld 123 <s>  \xF0\x9F\x98\x80", true);
    if (ids.ok()) {
      std::vector<std::int32_t> in_range;
      for (std::int32_t id : *ids) {
        if (id >= 0 && id < tok->size()) in_range.push_back(id);
      }
      (void)tok->decode(in_range);
    }
    for (std::int32_t id = 0; id < std::min<std::int64_t>(tok->size(), 64); ++id) {
      auto text = tok->token_text(id);
      if (text.ok() && mamba::tok::utf8_valid_prefix(*text) != text->size()) std::abort();
    }
  } else {
    for (const auto& tok : toks) {
      std::vector<std::int32_t> ids;
      for (std::size_t i = 0; i + 1 < rest.size(); i += 2) {
        const int v = static_cast<std::uint8_t>(rest[i]) | (static_cast<std::uint8_t>(rest[i + 1]) << 8);
        ids.push_back(static_cast<std::int32_t>(v % (tok.size() + 1)));
      }
      bool all_valid = true;
      for (std::int32_t id : ids) all_valid &= id < tok.size();
      if (tok.decode(ids).ok() != all_valid) std::abort();
      if (all_valid) check_stream(tok, ids);
    }
  }
  return 0;
}
