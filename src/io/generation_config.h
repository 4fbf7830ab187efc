// generation_config.json and the other optional JSON side files of a model directory
// (tokenizer_config.json): read as config.json is (Python's bare Infinity/NaN accepted).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mamba/status.h"

namespace mamba::io {

/// The file `name` in `model_dir` as a JSON object; nullopt when the directory has no such entry
/// (or `model_dir` is empty). Errors: has_model_file's (a dangling link, a directory), kIo when it
/// cannot be read, kFormat naming the file for invalid JSON (with the parser's position) or a
/// value that is not an object.
Result<std::optional<nlohmann::json>> read_json_object_file(const std::string& model_dir, const std::string& name);

/// generation_config.json's `eos_token_id` (an integer or a list of them; HF GenerationConfig) in
/// `model_dir`: nullopt when the file is absent or the key is missing or null. Errors: as
/// read_json_object_file; kFormat naming the file when an entry is not an integer in
/// [0, INT32_MAX]; kInvalidArgument when one is ≥ `vocab_size` (the model could never generate it).
Result<std::optional<std::vector<std::int32_t>>> read_generation_eos_ids(const std::string& model_dir, std::int64_t vocab_size);

/// What generation_config.json in `model_dir` asks of sampling, when it sets `do_sample: true`:
/// "DIR/generation_config.json sets do_sample: true (temperature 0.7, top_p 0.9)" (the fields of
/// temperature, top_k, top_p, min_p, typical_p that it sets, as written); "" when it does not, or the
/// file is absent or unreadable (read_generation_eos_ids reports those). For a note: this project's
/// defaults stay greedy whatever the file says.
std::string generation_sampling_note(const std::string& model_dir);

/// tokenizer_config.json's `eos_token` in `model_dir` (a string, or an object whose "content" is
/// one, as HF tokenizers' AddedToken is saved): nullopt when the file is absent or the key is
/// missing or null. Errors: as read_json_object_file; kFormat naming the file and the field when
/// the value has another type or an object lacks "content".
Result<std::optional<std::string>> read_tokenizer_eos_token(const std::string& model_dir);

/// A tokenizer's chat template (HF tokenizer_config.json) and the special tokens it refers to.
struct TokenizerChatTemplate {
  std::string source;                ///< the Jinja2 text of `chat_template`; "" when the file has none
  /// The special tokens the file sets (HF's SPECIAL_TOKENS_ATTRIBUTES: bos_token, eos_token,
  /// unk_token, sep_token, pad_token, cls_token, mask_token; absent or null ones left out), name →
  /// text: apply_chat_template passes them to the template as variables.
  std::map<std::string, std::string> special_tokens;
  std::string path;                  ///< the file, for messages
  /// HF's list form: every entry, name → Jinja2 text (source is the "default" one's, "" when none
  /// is named so); empty when `chat_template` is a string or absent.
  std::map<std::string, std::string> named_templates;
};
/// tokenizer_config.json's `chat_template` in `model_dir`: a string, or HF's list of {"name",
/// "template"} (the entry named "default", as transformers picks it; all of them in
/// named_templates); source "" when the key or a "default" entry is absent (or null); nullopt when the file is. Each special token is read as
/// read_tokenizer_eos_token reads eos_token. Errors: as read_json_object_file; kFormat naming the
/// file and the field when a value has another type.
Result<std::optional<TokenizerChatTemplate>> read_tokenizer_chat_template(const std::string& model_dir);

}  // namespace mamba::io
