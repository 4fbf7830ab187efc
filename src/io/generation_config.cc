// generation_config.json's eos_token_id, tokenizer_config.json's eos_token, and the JSON side files
// of a model directory they are read from.
#include "io/generation_config.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "io/json_lenient.h"
#include "mamba/checkpoint.h"

namespace mamba::io {

Result<std::optional<nlohmann::json>> read_json_object_file(const std::string& model_dir, const std::string& name) {
  namespace fs = std::filesystem;
  bool has_file = false;
  if (!model_dir.empty()) {
    MAMBA_ASSIGN_OR_RETURN(has_file, has_model_file(model_dir, name));
  }
  if (!has_file) return std::optional<nlohmann::json>();
  const fs::path path = fs::path(model_dir) / name;
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in) return make_error(ErrorCode::kIo, fmt::format("{}: cannot read", path.string()));
  MAMBA_ASSIGN_OR_RETURN(nlohmann::json j, parse_json_lenient(ss.str(), path.string()));
  if (!j.is_object()) return make_error(ErrorCode::kFormat, fmt::format("{}: expected a JSON object, got {}", path.string(), j.type_name()));
  return std::optional<nlohmann::json>(std::move(j));
}

Result<std::optional<std::vector<std::int32_t>>> read_generation_eos_ids(const std::string& model_dir, std::int64_t vocab_size) {
  using Ids = std::optional<std::vector<std::int32_t>>;
  MAMBA_ASSIGN_OR_RETURN(auto gen, read_json_object_file(model_dir, "generation_config.json"));
  if (!gen) return Ids();
  const auto it = gen->find("eos_token_id");
  if (it == gen->end() || it->is_null()) return Ids();
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  std::vector<std::int32_t> ids;
  auto one = [&](const nlohmann::json& x) -> Status {
    if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() > INT32_MAX)
      return make_error(ErrorCode::kFormat, fmt::format("{}: eos_token_id: expected a non-negative integer, got {}", path, x.dump()));
    // As config.json's: an EOS id outside the vocabulary could never be generated.
    if (x.get<std::int64_t>() >= vocab_size)
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: eos_token_id = {}: expected a token id in [0, vocab_size = {})",
                                                                 path, x.get<std::int64_t>(), vocab_size));
    ids.push_back(static_cast<std::int32_t>(x.get<std::int64_t>()));
    return {};
  };
  if (it->is_array()) {
    for (const auto& x : *it) MAMBA_RETURN_IF_ERROR(one(x));
  } else {
    MAMBA_RETURN_IF_ERROR(one(*it));
  }
  return Ids(std::move(ids));
}

std::string generation_sampling_note(const std::string& model_dir) {
  auto gen = read_json_object_file(model_dir, "generation_config.json");
  if (!gen.ok() || !gen->has_value()) return {};
  const nlohmann::json& j = **gen;
  const auto ds = j.find("do_sample");
  if (ds == j.end() || !ds->is_boolean() || !ds->get<bool>()) return {};
  std::string fields;
  for (const char* k : {"temperature", "top_k", "top_p", "min_p", "typical_p"})
    if (const auto it = j.find(k); it != j.end() && !it->is_null())
      fields += fmt::format("{}{} {}", fields.empty() ? "" : ", ", k, it->dump());
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  return fmt::format("{} sets do_sample: true{}", path, fields.empty() ? "" : " (" + fields + ")");
}

namespace {

/// A special token's text in tokenizer_config.json (`key`: a string, or an AddedToken object whose
/// "content" is one); nullopt when missing or null. Errors: kFormat naming `path` and the field.
Result<std::optional<std::string>> special_token_text(const nlohmann::json& cfg, const char* key, const std::string& path) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return std::optional<std::string>();
  const nlohmann::json* content = &*it;
  std::string field = key;
  if (it->is_object()) {
    const auto c = it->find("content");
    if (c == it->end()) return make_error(ErrorCode::kFormat, fmt::format("{}: {}: an object without \"content\"", path, key));
    content = &*c;
    field += ".content";
  }
  if (!content->is_string())
    return make_error(ErrorCode::kFormat, fmt::format("{}: {}: expected a string, got {}", path, field, content->dump()));
  return std::optional<std::string>(content->get<std::string>());
}

}  // namespace

Result<std::optional<std::string>> read_tokenizer_eos_token(const std::string& model_dir) {
  MAMBA_ASSIGN_OR_RETURN(auto cfg, read_json_object_file(model_dir, "tokenizer_config.json"));
  if (!cfg) return std::optional<std::string>();
  return special_token_text(*cfg, "eos_token", (std::filesystem::path(model_dir) / "tokenizer_config.json").string());
}

Result<std::optional<TokenizerChatTemplate>> read_tokenizer_chat_template(const std::string& model_dir) {
  MAMBA_ASSIGN_OR_RETURN(auto cfg, read_json_object_file(model_dir, "tokenizer_config.json"));
  if (!cfg) return std::optional<TokenizerChatTemplate>();
  TokenizerChatTemplate t;
  t.path = (std::filesystem::path(model_dir) / "tokenizer_config.json").string();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    MAMBA_ASSIGN_OR_RETURN(auto text, special_token_text(*cfg, key, t.path));
    if (text) t.special_tokens[key] = *text;
  }
  const auto it = cfg->find("chat_template");
  if (it == cfg->end() || it->is_null()) {
    // no template
  } else if (it->is_string()) {
    t.source = it->get<std::string>();
  } else if (it->is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    for (const nlohmann::json& e : *it) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") || !e["template"].is_string())
        return make_error(ErrorCode::kFormat,
                          fmt::format("{}: chat_template: a list's entries must be {{\"name\": string, \"template\": string}}, got {}",
                                      t.path, e.dump().substr(0, 120)));
      t.named_templates[e["name"].get<std::string>()] = e["template"].get<std::string>();
    }
    if (const auto d = t.named_templates.find("default"); d != t.named_templates.end()) t.source = d->second;
  } else {
    return make_error(ErrorCode::kFormat,
                      fmt::format("{}: chat_template: expected a string or a list of named templates, got {}", t.path, it->type_name()));
  }
  return std::optional<TokenizerChatTemplate>(std::move(t));
}

}  // namespace mamba::io
