// Loading tokenizer.json into a Tokenizer::Impl, component by component. Every error names the
// file and the JSON path of the offending field; unknown component types are kUnsupported.
#include <cstring>
#include <cerrno>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/bounded_json.h"
#include "tokenizer/impl.h"
#include "tokenizer/unicode.h"

namespace mamba {

namespace {

using json = nlohmann::json;
using namespace tok;

// Context for error messages: the file name.
struct Loader {
  std::string source;
  mutable bool saw_byte_fallback = false;

  Error format(const std::string& path, const std::string& what) const {
    return make_error(ErrorCode::kFormat, fmt::format("{}: {}: {}", source, path, what));
  }
  Error unsupported(const std::string& path, const std::string& type, std::string_view supported) const {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: {}.type '{}' is not supported (supported: {})", source, path, type, supported));
  }

  Result<const json*> member(const json& obj, const std::string& path, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end()) return format(path, fmt::format("missing field '{}'", key));
    return &*it;
  }
  Result<std::string> get_string(const json& obj, const std::string& path, const char* key) const {
    MAMBA_ASSIGN_OR_RETURN(const json* v, member(obj, path, key));
    if (!v->is_string()) return format(path + "." + key, fmt::format("expected a string, got {}", v->type_name()));
    return v->get<std::string>();
  }
  Result<bool> get_bool(const json& obj, const std::string& path, const char* key, bool def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_boolean()) return format(path + "." + key, fmt::format("expected a boolean, got {}", it->type_name()));
    return it->get<bool>();
  }
  Result<std::int64_t> get_int(const json& obj, const std::string& path, const char* key, std::int64_t lo, std::int64_t hi) const {
    MAMBA_ASSIGN_OR_RETURN(const json* v, member(obj, path, key));
    if (!v->is_number_integer()) return format(path + "." + key, fmt::format("expected an integer, got {}", v->type_name()));
    const auto x = v->is_number_unsigned() ? static_cast<std::int64_t>(std::min<std::uint64_t>(v->get<std::uint64_t>(), INT64_MAX))
                                           : v->get<std::int64_t>();
    if (x < lo || x > hi) return format(path + "." + key, fmt::format("expected an integer in [{}, {}], got {}", lo, hi, x));
    return x;
  }
  Result<std::optional<std::string>> get_opt_string(const json& obj, const std::string& path, const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return std::optional<std::string>();
    if (!it->is_string()) return format(path + "." + key, fmt::format("expected a string or null, got {}", it->type_name()));
    return std::optional<std::string>(it->get<std::string>());
  }
  // A string of exactly one character (Rust `char`).
  Result<char32_t> get_char(const json& obj, const std::string& path, const char* key) const {
    MAMBA_ASSIGN_OR_RETURN(std::string s, get_string(obj, path, key));
    std::size_t i = 0;
    if (s.empty() || (utf8_next(s, i), i != s.size())) {
      return format(path + "." + key, fmt::format("expected a single character, got '{}'", s));
    }
    i = 0;
    return utf8_next(s, i);
  }
  Result<std::string> get_type(const json& obj, const std::string& path) const {
    if (!obj.is_object()) return format(path, fmt::format("expected an object, got {}", obj.type_name()));
    return get_string(obj, path, "type");
  }
  Result<const json*> get_array(const json& obj, const std::string& path, const char* key) const {
    MAMBA_ASSIGN_OR_RETURN(const json* v, member(obj, path, key));
    if (!v->is_array()) return format(path + "." + key, fmt::format("expected an array, got {}", v->type_name()));
    return v;
  }

  // {"String": "..."} or {"Regex": "..."}.
  Result<SplitPattern> pattern(const json& obj, const std::string& path) const {
    MAMBA_ASSIGN_OR_RETURN(const json* p, member(obj, path, "pattern"));
    const std::string ppath = path + ".pattern";
    if (!p->is_object()) return format(ppath, "expected {\"String\": ...} or {\"Regex\": ...}");
    if (auto it = p->find("String"); it != p->end() && it->is_string()) return SplitPattern::literal(it->get<std::string>());
    if (auto it = p->find("Regex"); it != p->end() && it->is_string()) {
      MAMBA_ASSIGN_OR_RETURN(auto re, Regex::compile(it->get<std::string>(), source + ": " + ppath + ".Regex"));
      return SplitPattern::regex(std::move(re));
    }
    return format(ppath, "expected {\"String\": ...} or {\"Regex\": ...}");
  }

  Result<std::unique_ptr<Normalizer>> normalizer(const json& j, const std::string& path) const {
    MAMBA_ASSIGN_OR_RETURN(std::string type, get_type(j, path));
    if (type == "NFC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(UnicodeForm::kNFC));
    if (type == "NFD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(UnicodeForm::kNFD));
    if (type == "NFKC") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(UnicodeForm::kNFKC));
    if (type == "NFKD") return std::unique_ptr<Normalizer>(new UnicodeNormalizer(UnicodeForm::kNFKD));
    if (type == "Prepend") {
      MAMBA_ASSIGN_OR_RETURN(std::string p, get_string(j, path, "prepend"));
      return std::unique_ptr<Normalizer>(new PrependNormalizer(std::move(p)));
    }
    if (type == "Replace") {
      MAMBA_ASSIGN_OR_RETURN(SplitPattern p, pattern(j, path));
      MAMBA_ASSIGN_OR_RETURN(std::string content, get_string(j, path, "content"));
      return std::unique_ptr<Normalizer>(new ReplaceNormalizer(std::move(p), std::move(content)));
    }
    if (type == "Sequence") {
      MAMBA_ASSIGN_OR_RETURN(const json* arr, get_array(j, path, "normalizers"));
      std::vector<std::unique_ptr<Normalizer>> items;
      for (std::size_t k = 0; k < arr->size(); ++k) {
        MAMBA_ASSIGN_OR_RETURN(auto n, normalizer((*arr)[k], fmt::format("{}.normalizers[{}]", path, k)));
        items.push_back(std::move(n));
      }
      return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(items)));
    }
    return unsupported(path, type, "NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence");
  }

  Result<MetaspacePreTokenizer::Prepend> prepend_scheme(const json& j, const std::string& path) const {
    MAMBA_ASSIGN_OR_RETURN(auto scheme, get_opt_string(j, path, "prepend_scheme"));
    if (!scheme) {
      // Older files: add_prefix_space (default true) → "always" / "never".
      MAMBA_ASSIGN_OR_RETURN(bool add, get_bool(j, path, "add_prefix_space", true));
      return add ? MetaspacePreTokenizer::Prepend::kAlways : MetaspacePreTokenizer::Prepend::kNever;
    }
    if (*scheme == "always") return MetaspacePreTokenizer::Prepend::kAlways;
    if (*scheme == "first") return MetaspacePreTokenizer::Prepend::kFirst;
    if (*scheme == "never") return MetaspacePreTokenizer::Prepend::kNever;
    return format(path + ".prepend_scheme", fmt::format("expected 'always', 'first' or 'never', got '{}'", *scheme));
  }

  Result<SplitBehavior> behavior(const json& j, const std::string& path, SplitBehavior def) const {
    MAMBA_ASSIGN_OR_RETURN(auto name, get_opt_string(j, path, "behavior"));
    if (!name) return def;
    SplitBehavior b;
    if (!parse_split_behavior(*name, &b)) {
      return format(path + ".behavior", fmt::format("unknown split behavior '{}' (expected Removed, Isolated, "
                                                    "MergedWithPrevious, MergedWithNext or Contiguous)", *name));
    }
    return b;
  }

  Result<std::unique_ptr<PreTokenizer>> pre_tokenizer(const json& j, const std::string& path) const {
    MAMBA_ASSIGN_OR_RETURN(std::string type, get_type(j, path));
    if (type == "ByteLevel") {
      MAMBA_ASSIGN_OR_RETURN(bool add_prefix_space, get_bool(j, path, "add_prefix_space", true));
      MAMBA_ASSIGN_OR_RETURN(bool use_regex, get_bool(j, path, "use_regex", true));
      MAMBA_ASSIGN_OR_RETURN(auto p, ByteLevelPreTokenizer::create(add_prefix_space, use_regex));
      return std::unique_ptr<PreTokenizer>(std::move(p));
    }
    if (type == "Split") {
      MAMBA_ASSIGN_OR_RETURN(SplitPattern p, pattern(j, path));
      MAMBA_ASSIGN_OR_RETURN(SplitBehavior b, behavior(j, path, SplitBehavior::kIsolated));
      MAMBA_ASSIGN_OR_RETURN(bool invert, get_bool(j, path, "invert", false));
      return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(std::move(p), b, invert));
    }
    if (type == "Digits") {
      MAMBA_ASSIGN_OR_RETURN(bool individual, get_bool(j, path, "individual_digits", false));
      return std::unique_ptr<PreTokenizer>(new DigitsPreTokenizer(individual));
    }
    if (type == "Punctuation") {
      MAMBA_ASSIGN_OR_RETURN(SplitBehavior b, behavior(j, path, SplitBehavior::kIsolated));
      return std::unique_ptr<PreTokenizer>(new PunctuationPreTokenizer(b));
    }
    if (type == "Metaspace") {
      MAMBA_ASSIGN_OR_RETURN(char32_t rep, get_char(j, path, "replacement"));
      MAMBA_ASSIGN_OR_RETURN(auto scheme, prepend_scheme(j, path));
      MAMBA_ASSIGN_OR_RETURN(bool split, get_bool(j, path, "split", true));
      return std::unique_ptr<PreTokenizer>(new MetaspacePreTokenizer(rep, scheme, split));
    }
    if (type == "WhitespaceSplit") return std::unique_ptr<PreTokenizer>(new WhitespaceSplitPreTokenizer());
    if (type == "Sequence") {
      MAMBA_ASSIGN_OR_RETURN(const json* arr, get_array(j, path, "pretokenizers"));
      std::vector<std::unique_ptr<PreTokenizer>> items;
      for (std::size_t k = 0; k < arr->size(); ++k) {
        MAMBA_ASSIGN_OR_RETURN(auto p, pre_tokenizer((*arr)[k], fmt::format("{}.pretokenizers[{}]", path, k)));
        items.push_back(std::move(p));
      }
      return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(items)));
    }
    return unsupported(path, type, "ByteLevel, Split, Digits, Punctuation, Metaspace, WhitespaceSplit, Sequence");
  }

  Result<std::unique_ptr<BpeModel>> model(const json& j) const {
    const std::string path = "model";
    if (!j.is_object()) return format(path, fmt::format("expected an object, got {}", j.type_name()));
    std::string type = "BPE";
    if (j.contains("type")) {
      MAMBA_ASSIGN_OR_RETURN(type, get_string(j, path, "type"));
    }
    if (type != "BPE") return unsupported(path, type, "BPE");
    if (auto it = j.find("dropout"); it != j.end() && !it->is_null()) {
      if (!it->is_number()) return format("model.dropout", "expected a number or null");
      if (it->get<double>() != 0.0) {
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("{}: model.dropout = {}: BPE dropout (random merges) is not supported", source, it->get<double>()));
      }
    }
    BpeOptions opt;
    MAMBA_ASSIGN_OR_RETURN(opt.byte_fallback, get_bool(j, path, "byte_fallback", false));
    MAMBA_ASSIGN_OR_RETURN(opt.ignore_merges, get_bool(j, path, "ignore_merges", false));
    MAMBA_ASSIGN_OR_RETURN(opt.fuse_unk, get_bool(j, path, "fuse_unk", false));
    MAMBA_ASSIGN_OR_RETURN(opt.unk_token, get_opt_string(j, path, "unk_token"));
    MAMBA_ASSIGN_OR_RETURN(opt.continuing_subword_prefix, get_opt_string(j, path, "continuing_subword_prefix"));
    MAMBA_ASSIGN_OR_RETURN(opt.end_of_word_suffix, get_opt_string(j, path, "end_of_word_suffix"));

    MAMBA_ASSIGN_OR_RETURN(const json* vocab_json, member(j, path, "vocab"));
    if (!vocab_json->is_object()) return format("model.vocab", fmt::format("expected an object, got {}", vocab_json->type_name()));
    StringMap<std::int32_t> vocab;
    vocab.reserve(vocab_json->size());
    for (auto it = vocab_json->begin(); it != vocab_json->end(); ++it) {
      if (!it.value().is_number_integer()) {
        return format(fmt::format("model.vocab['{}']", it.key()), fmt::format("expected an integer id, got {}", it.value().type_name()));
      }
      const std::int64_t id = it.value().is_number_unsigned() ? static_cast<std::int64_t>(std::min<std::uint64_t>(it.value().get<std::uint64_t>(), INT64_MAX))
                                                              : it.value().get<std::int64_t>();
      if (id < 0 || id > kMaxId) return format(fmt::format("model.vocab['{}']", it.key()), fmt::format("id {} out of range [0, {}]", id, kMaxId));
      vocab.emplace(it.key(), static_cast<std::int32_t>(id));
    }
    std::vector<std::pair<std::string, std::string>> merges;
    if (auto mit = j.find("merges"); mit != j.end() && !mit->is_null()) {
      if (!mit->is_array()) return format("model.merges", fmt::format("expected an array, got {}", mit->type_name()));
      merges.reserve(mit->size());
      std::size_t rank = 0;
      for (std::size_t k = 0; k < mit->size(); ++k) {
        const json& m = (*mit)[k];
        const std::string mpath = fmt::format("model.merges[{}]", k);
        if (m.is_string()) {
          const std::string& line = m.get_ref<const std::string&>();
          if (line.rfind("#version", 0) == 0) continue;  // HF skips these header lines
          const std::size_t sp = line.find(' ');
          if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos) {
            return format(mpath, fmt::format("expected \"a b\" (two tokens separated by one space), got '{}'", line));
          }
          merges.emplace_back(line.substr(0, sp), line.substr(sp + 1));
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
          merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
        } else {
          return format(mpath, "expected \"a b\" or [\"a\", \"b\"]");
        }
        ++rank;
      }
    }
    return BpeModel::create(std::move(vocab), merges, std::move(opt), source);
  }

  Result<std::unique_ptr<Decoder>> decoder(const json& j, const std::string& path) const {
    MAMBA_ASSIGN_OR_RETURN(std::string type, get_type(j, path));
    if (type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder());
    if (type == "ByteFallback") {
      saw_byte_fallback = true;
      return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
    }
    if (type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
    if (type == "Metaspace") {
      MAMBA_ASSIGN_OR_RETURN(char32_t rep, get_char(j, path, "replacement"));
      MAMBA_ASSIGN_OR_RETURN(auto scheme, prepend_scheme(j, path));
      return std::unique_ptr<Decoder>(new MetaspaceDecoder(rep, scheme != MetaspacePreTokenizer::Prepend::kNever));
    }
    if (type == "Strip") {
      MAMBA_ASSIGN_OR_RETURN(char32_t content, get_char(j, path, "content"));
      MAMBA_ASSIGN_OR_RETURN(std::int64_t start, get_int(j, path, "start", 0, 1 << 30));
      MAMBA_ASSIGN_OR_RETURN(std::int64_t stop, get_int(j, path, "stop", 0, 1 << 30));
      return std::unique_ptr<Decoder>(new StripDecoder(content, static_cast<std::size_t>(start), static_cast<std::size_t>(stop)));
    }
    if (type == "Replace") {
      MAMBA_ASSIGN_OR_RETURN(SplitPattern p, pattern(j, path));
      MAMBA_ASSIGN_OR_RETURN(std::string content, get_string(j, path, "content"));
      return std::unique_ptr<Decoder>(new ReplaceDecoder(std::move(p), std::move(content)));
    }
    if (type == "Sequence") {
      MAMBA_ASSIGN_OR_RETURN(const json* arr, get_array(j, path, "decoders"));
      std::vector<std::unique_ptr<Decoder>> items;
      for (std::size_t k = 0; k < arr->size(); ++k) {
        MAMBA_ASSIGN_OR_RETURN(auto d, decoder((*arr)[k], fmt::format("{}.decoders[{}]", path, k)));
        items.push_back(std::move(d));
      }
      return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(items)));
    }
    return unsupported(path, type, "ByteLevel, ByteFallback, Fuse, Metaspace, Strip, Replace, Sequence");
  }

  // The ids of special token `name` for a template.
  Result<std::vector<std::int32_t>> special_ids(const json& specials, const std::string& path, const std::string& name) const {
    auto it = specials.find(name);
    if (it == specials.end() || !it->is_object()) return format(path, fmt::format("special token '{}' is not in special_tokens", name));
    MAMBA_ASSIGN_OR_RETURN(const json* ids, get_array(*it, fmt::format("{}.special_tokens['{}']", path, name), "ids"));
    std::vector<std::int32_t> out;
    for (const auto& x : *ids) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > kMaxId) {
        return format(fmt::format("{}.special_tokens['{}'].ids", path, name), "expected non-negative integer ids");
      }
      out.push_back(static_cast<std::int32_t>(x.get<std::int64_t>()));
    }
    return out;
  }

  Result<std::unique_ptr<PostProcessor>> post_processor(const json& j, const std::string& path, const Tokenizer::Impl& impl) const {
    MAMBA_ASSIGN_OR_RETURN(std::string type, get_type(j, path));
    if (type == "ByteLevel") return std::unique_ptr<PostProcessor>(new NoopPostProcessor());
    if (type == "TemplateProcessing") {
      MAMBA_ASSIGN_OR_RETURN(const json* single, get_array(j, path, "single"));
      MAMBA_ASSIGN_OR_RETURN(const json* specials, member(j, path, "special_tokens"));
      std::vector<TemplatePostProcessor::Item> items;
      for (std::size_t k = 0; k < single->size(); ++k) {
        const json& it = (*single)[k];
        const std::string ipath = fmt::format("{}.single[{}]", path, k);
        TemplatePostProcessor::Item item;
        if (it.is_object() && it.contains("Sequence")) {
          item.is_sequence = true;
        } else if (it.is_object() && it.contains("SpecialToken") && it["SpecialToken"].is_object()) {
          MAMBA_ASSIGN_OR_RETURN(std::string name, get_string(it["SpecialToken"], ipath + ".SpecialToken", "id"));
          MAMBA_ASSIGN_OR_RETURN(item.ids, special_ids(*specials, path, name));
        } else {
          return format(ipath, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
        }
        items.push_back(std::move(item));
      }
      return std::unique_ptr<PostProcessor>(new TemplatePostProcessor(std::move(items)));
    }
    if (type == "BertProcessing" || type == "RobertaProcessing") {
      auto pair_id = [&](const char* key) -> Result<std::int32_t> {
        MAMBA_ASSIGN_OR_RETURN(const json* p, get_array(j, path, key));
        if (p->size() != 2 || !(*p)[1].is_number_integer()) return format(path + "." + key, "expected [token, id]");
        return static_cast<std::int32_t>((*p)[1].get<std::int64_t>());
      };
      MAMBA_ASSIGN_OR_RETURN(std::int32_t cls, pair_id("cls"));
      MAMBA_ASSIGN_OR_RETURN(std::int32_t sep, pair_id("sep"));
      std::vector<TemplatePostProcessor::Item> items(3);
      items[0].ids = {cls};
      items[1].is_sequence = true;
      items[2].ids = {sep};
      return std::unique_ptr<PostProcessor>(new TemplatePostProcessor(std::move(items)));
    }
    if (type == "Sequence") {
      MAMBA_ASSIGN_OR_RETURN(const json* arr, get_array(j, path, "processors"));
      std::vector<std::unique_ptr<PostProcessor>> items;
      for (std::size_t k = 0; k < arr->size(); ++k) {
        MAMBA_ASSIGN_OR_RETURN(auto p, post_processor((*arr)[k], fmt::format("{}.processors[{}]", path, k), impl));
        items.push_back(std::move(p));
      }
      return std::unique_ptr<PostProcessor>(new SequencePostProcessor(std::move(items)));
    }
    return unsupported(path, type, "ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing, Sequence");
  }

  Status added_tokens(const json& root, Tokenizer::Impl& impl) const {
    auto it = root.find("added_tokens");
    if (it == root.end() || it->is_null()) return {};
    if (!it->is_array()) return format("added_tokens", fmt::format("expected an array, got {}", it->type_name()));
    for (std::size_t k = 0; k < it->size(); ++k) {
      const json& t = (*it)[k];
      const std::string path = fmt::format("added_tokens[{}]", k);
      if (!t.is_object()) return format(path, "expected an object");
      AddedToken a;
      MAMBA_ASSIGN_OR_RETURN(std::int64_t id, get_int(t, path, "id", 0, kMaxId));
      a.id = static_cast<std::int32_t>(id);
      MAMBA_ASSIGN_OR_RETURN(a.content, get_string(t, path, "content"));
      MAMBA_ASSIGN_OR_RETURN(a.special, get_bool(t, path, "special", false));
      MAMBA_ASSIGN_OR_RETURN(a.normalized, get_bool(t, path, "normalized", !a.special));
      MAMBA_ASSIGN_OR_RETURN(a.lstrip, get_bool(t, path, "lstrip", false));
      MAMBA_ASSIGN_OR_RETURN(a.rstrip, get_bool(t, path, "rstrip", false));
      MAMBA_ASSIGN_OR_RETURN(a.single_word, get_bool(t, path, "single_word", false));
      impl.added_by_id[a.id] = impl.added_tokens.size();
      impl.added_by_content[a.content] = a.id;
      impl.added_tokens.push_back(std::move(a));
    }
    return {};
  }

  /// Largest token id accepted: 2^24 − 1, 64× the largest vocabularies in use (~256K). Id tables
  /// are dense (size = largest id + 1), so a tiny file naming id 10^8 once allocated 3 GB.
  static constexpr std::int64_t kMaxId = (std::int64_t{1} << 24) - 1;
};

// True when `p` is ByteLevel or a Sequence ending in ByteLevel; switches that ByteLevel to leave
// the byte mapping to the model.
bool defer_byte_mapping(PreTokenizer* p) {
  if (auto* bl = dynamic_cast<ByteLevelPreTokenizer*>(p)) {
    bl->set_map_bytes(false);
    return true;
  }
  if (auto* seq = dynamic_cast<SequencePreTokenizer*>(p); seq && !seq->items().empty()) {
    return defer_byte_mapping(seq->items().back().get());
  }
  return false;
}

}  // namespace

Result<Tokenizer> Tokenizer::from_json_text(const std::string& json_text, const std::string& source) {
  Loader L{source};
  json root;
  try {
    if (auto fault = parse_json_bounded(json_text, root))
      return make_error(ErrorCode::kFormat, fmt::format("{}: invalid JSON: {}", source, fault->message));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kIo, fmt::format("{}: out of memory while parsing ({} bytes of JSON)", source, json_text.size()));
  }
  try {
    if (!root.is_object()) return L.format("(root)", fmt::format("expected an object, got {}", root.type_name()));
    Tokenizer t;
    Impl& impl = *t.impl_;
    impl.source = source;
    if (auto it = root.find("normalizer"); it != root.end() && !it->is_null()) {
      MAMBA_ASSIGN_OR_RETURN(impl.normalizer, L.normalizer(*it, "normalizer"));
    }
    if (auto it = root.find("pre_tokenizer"); it != root.end() && !it->is_null()) {
      MAMBA_ASSIGN_OR_RETURN(impl.pre_tokenizer, L.pre_tokenizer(*it, "pre_tokenizer"));
      impl.model_maps_bytes = defer_byte_mapping(impl.pre_tokenizer.get());
    }
    {
      MAMBA_ASSIGN_OR_RETURN(const json* m, L.member(root, "(root)", "model"));
      MAMBA_ASSIGN_OR_RETURN(impl.model, L.model(*m));
    }
    if (auto it = root.find("decoder"); it != root.end() && !it->is_null()) {
      MAMBA_ASSIGN_OR_RETURN(impl.decoder, L.decoder(*it, "decoder"));
      impl.decoder_has_byte_fallback = L.saw_byte_fallback;
    }
    MAMBA_RETURN_IF_ERROR(L.added_tokens(root, impl));
    if (auto it = root.find("post_processor"); it != root.end() && !it->is_null()) {
      MAMBA_ASSIGN_OR_RETURN(impl.post_processor, L.post_processor(*it, "post_processor", impl));
    }
    impl.raw_matcher = tok::AddedTokenMatcher(impl.added_tokens, false, nullptr);
    impl.normalized_matcher = tok::AddedTokenMatcher(impl.added_tokens, true, impl.normalizer.get());
    impl.size = impl.model->id_limit();
    for (const auto& a : impl.added_tokens) impl.size = std::max<std::int64_t>(impl.size, std::int64_t{a.id} + 1);
    if (impl.size == 0) return make_error(ErrorCode::kFormat, fmt::format("{}: no tokens (empty model.vocab and no added_tokens)", source));
    impl.choose_context_id();
    impl.choose_newline_cuts();
    return t;
  } catch (const std::bad_alloc&) {
    root = nullptr;  // give the parsed document's memory back first: the message needs some too
    return make_error(ErrorCode::kIo, fmt::format("{}: out of memory while loading the tokenizer", source));
  } catch (const std::exception& e) {
    // Defensive: a JSON accessor threw (e.g. a type mismatch this loader did not anticipate).
    return make_error(ErrorCode::kFormat, fmt::format("{}: malformed tokenizer.json: {}", source, e.what()));
  }
}

Result<Tokenizer> Tokenizer::from_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st))  // (an ifstream opens a directory and reads nothing)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: is a directory, expected a tokenizer.json file (e.g. {})", path,
                                                               (fs::path(path) / "tokenizer.json").string()));
  if (fs::exists(st) && !fs::is_regular_file(st))  // a FIFO would block the read forever
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: not a regular file, expected a tokenizer.json file", path));
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return make_error(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      fmt::format("{}: cannot open tokenizer file: {}", path, std::strerror(errno)));
  std::string text;
  try {
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) return make_error(ErrorCode::kIo, fmt::format("{}: read error", path));
    text = std::move(ss).str();
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kIo, fmt::format("{}: out of memory while reading the tokenizer file", path));
  }
  return from_json_text(text, path);
}

}  // namespace mamba
