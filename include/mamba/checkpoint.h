// Checkpoint: the tensors of a model directory, mapped read-only, plus its ModelConfig.
//
// Formats: HF safetensors (`model.safetensors`, or shards listed by `model.safetensors.index.json`)
// and state-spaces `pytorch_model.bin` (zip + restricted unpickler; never executes anything).
// Tensors keep their stored dtype (F32/BF16/F16; Q8/Q4 codes and scales in a quantized checkpoint) and are mmapped without copies when possible
// (pickle storages are mmapped too when stored uncompressed, which torch.save does).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mamba/config.h"
#include "mamba/status.h"
#include "mamba/tensor.h"

namespace mamba {

/// Resolves a model reference to a local directory: an existing directory is returned as is;
/// otherwise `ORG/NAME[@REVISION]` (or a legacy `NAME` without an org) is looked up in the Hugging
/// Face hub cache exactly as huggingface_hub lays it out ($HF_HUB_CACHE, else the legacy
/// $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
/// ~/.cache/huggingface/hub, with ~ and $VAR in those values expanded; ~ is $HOME, else — unset or
/// empty — the password database's home directory, as Python's expanduser; models--ORG--NAME/refs/<rev>
/// → snapshots/<commit>/; a revision that is no ref names a snapshot directly).
/// Errors: kNotFound naming every place looked and how to download (`hf download ORG/NAME`);
/// kNotFound saying so when no variable and no home directory locate the cache (it is never looked
/// for relative to the working directory).
Result<std::string> resolve_model_path(const std::string& model_ref);

/// Directory of the embedded default model (mamba2-books-7m-bpe8k), searched in order:
/// $MAMBA_MODEL; next to the executable (<exe dir>/models/NAME, <exe dir>/../share/mamba.cpp/models/NAME);
/// the configured install data dir; the source tree's models/NAME. A non-empty $MAMBA_MODEL is
/// returned even when it is not a model directory (it may be a repo id; resolve_model_path then
/// reports it), never skipped in favour of another model. Empty string if none holds a config.json.
std::string default_model_path();

/// The model to use when none is given, as a local directory: $MAMBA_MODEL when set and non-empty
/// (a directory or a cached HF repo id), else default_model_path(). Errors: kNotFound naming
/// MAMBA_MODEL and its value when it does not resolve to a directory with a config.json (an
/// explicit setting is never silently replaced by the embedded model), or when no default exists.
Result<std::string> resolve_default_model();

/// Whether model directory `dir` holds the optional file `name` (tokenizer.json,
/// generation_config.json): true for a regular file or a symbolic link to one, false when no entry
/// of that name exists. Errors name the path when an entry exists but is not a readable file: a
/// dangling symbolic link (kNotFound: an interrupted Hugging Face download leaves one), a directory
/// or another kind of file (kInvalidArgument), or no permission to read it (kIo). Never treats
/// such an entry as absent.
Result<bool> has_model_file(const std::string& dir, const std::string& name);

/// Resolves a `--tokenizer` reference to a tokenizer.json file whose path always has a directory
/// part (its tokenizer_config.json sits there): an existing file (or a link to one) is returned as
/// is (a bare name as ./NAME); a directory, or an `ORG/NAME[@REVISION]` in the Hugging Face hub cache
/// (resolve_model_path's lookup, e.g. EleutherAI/gpt-neox-20b for the state-spaces checkpoints that
/// ship without one), gives its tokenizer.json. Errors: kInvalidArgument for an empty reference;
/// kNotFound naming the directory that holds no tokenizer.json, or resolve_model_path's errors
/// (worded for a tokenizer: "tokenizer 'ORG/NAME' not found", and the download line fetches the
/// file alone, `hf download ORG/NAME tokenizer.json`);
/// has_model_file's errors for an entry that is no readable file.
Result<std::string> resolve_tokenizer_file(const std::string& tokenizer_ref);

/// The tokenizer.json a model directory `model_dir` is used with: resolve_tokenizer_file(
/// tokenizer_ref) when `tokenizer_ref` is not empty (a `--tokenizer`), else model_dir/tokenizer.json
/// when the directory has one, else nullopt (a state-spaces checkpoint ships none). Errors:
/// resolve_tokenizer_file's, and has_model_file's for a tokenizer.json entry that is no readable file.
Result<std::optional<std::string>> model_tokenizer_file(const std::string& model_dir, const std::string& tokenizer_ref);

/// One named tensor of a checkpoint.
struct TensorEntry {
  std::string name;  ///< as stored (e.g. "backbone.layers.0.mixer.in_proj.weight")
  TensorView view;   ///< points into a read-only mapping owned by the Checkpoint
  std::string file;  ///< file it came from (for error messages)
};

/// An opened checkpoint. Owns the file mappings; views stay valid while it lives. Move-only.
class Checkpoint {
 public:
  /// Opens `dir` (already resolved): reads config.json (format auto-detected), then the weights:
  /// the first of model.safetensors, model.safetensors.index.json, pytorch_model.bin,
  /// pytorch_model.bin.index.json that exists (transformers' order; one that exists but is not a
  /// readable file, e.g. a dangling link, is an error, as in has_model_file).
  /// Errors name the file and the problem: kNotFound (no config.json or no weights file, a shard
  /// the index names), kIo (a file that cannot be opened, read or mapped), kFormat (truncated
  /// header, offsets out of range, shape×dtype ≠ byte span, malformed JSON or pickle),
  /// kUnsupported (an unknown dtype or model_type, a forbidden pickle global/opcode, a GGUF file),
  /// and ModelConfig::from_json_text's.
  static Result<Checkpoint> open(const std::string& dir);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  /// The checkpoint's directory as resolved at open (a hub cache ref resolves to its snapshot).
  const std::string& dir() const;
  /// The parsed config.json (or state-spaces config); valid while the Checkpoint lives.
  const ModelConfig& config() const;
  /// The same config, writable: bind_weights completes fields only the tensors tell (d_mlp from
  /// in_proj's rows), so a model's config matches its weights.
  ModelConfig& mutable_config();
  /// All tensors, in file order.
  const std::vector<TensorEntry>& tensors() const;
  /// The tensor called `name`, or nullptr.
  const TensorEntry* find(const std::string& name) const;
  /// generation_config.json's `eos_token_id` as read at open (the file is not read again): nullopt
  /// when the file or the key is absent. Its error when the file was malformed (kFormat naming it),
  /// unreadable (kIo, has_model_file's errors) or named an id ≥ config().vocab_size
  /// (kInvalidArgument) — kept rather than failing open(). model_eos_ids(const Model&, ...) uses it.
  const Result<std::optional<std::vector<std::int32_t>>>& generation_eos_ids() const;
  /// tokenizer_config.json's `eos_token` (the token's text: a string, or an object's "content") as
  /// read at open, likewise: nullopt when the file or the key is absent or the key is null; its
  /// error (kFormat naming the file and field, kIo, has_model_file's) kept.
  /// model_eos_ids(const Model&, ...) maps it to an id through the tokenizer when neither
  /// generation_config.json nor config.json names an EOS (state-spaces checkpoints).
  const Result<std::optional<std::string>>& tokenizer_eos_token() const;
  /// Sum of stored tensor bytes.
  std::size_t weight_bytes() const;
  /// Tells the OS that the bytes [p, p + n) will not be read soon, when they lie inside one of this
  /// checkpoint's file mappings (else nothing): madvise(MADV_DONTNEED) on the whole pages inside, so
  /// they leave this process's resident set and fault back in from the page cache on a later read
  /// (the file is mapped read-only and never written). For weights the model has copied (repacked).
  void release_pages(const void* p, std::size_t n) const;

 private:
  Checkpoint();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mamba
