// The BPE model of tokenizer.json ("model": {"type": "BPE"}), as HF tokenizers' `BPE`:
// a word (one pre-tokenized piece) starts as one symbol per character (missing characters →
// byte-fallback tokens "<0xXX>", else unk_token, else dropped), then merges are applied lowest
// rank first (leftmost among equal ranks) until none applies. `ignore_merges`: a word that is
// itself in the vocab is one token. Results are cached per word (words under 256 bytes).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "mamba/status.h"
#include "tokenizer/flat_map.h"

namespace mamba::tok {

/// Hash for heterogeneous (string_view) lookups in string-keyed maps.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct BpeOptions {
  bool byte_fallback = false;
  bool ignore_merges = false;
  bool fuse_unk = false;
  std::optional<std::string> unk_token;
  std::optional<std::string> continuing_subword_prefix;
  std::optional<std::string> end_of_word_suffix;
};

class BpeModel {
 public:
  /// `vocab`: token → id; `merges`: pairs in rank order (rank = index).
  /// Errors (kFormat, prefixed by `where`): a merge whose parts or result are not in the vocab.
  static Result<std::unique_ptr<BpeModel>> create(StringMap<std::int32_t> vocab,
                                                  const std::vector<std::pair<std::string, std::string>>& merges,
                                                  BpeOptions options, const std::string& where);

  /// Appends the ids of one word. With `raw_bytes`, `word` is raw bytes still to be mapped to the
  /// byte-level alphabet (see byte_level.h); otherwise it is the model's input text itself.
  void tokenize(std::string_view word, bool raw_bytes, std::vector<std::int32_t>& out) const;

  std::optional<std::int32_t> token_to_id(std::string_view token) const;
  /// Token text of `id`, or nullptr.
  const std::string* id_to_token(std::int32_t id) const;
  /// max id + 1 (0 for an empty vocab).
  std::int64_t id_limit() const { return static_cast<std::int64_t>(id_to_token_.size()); }

 private:
  BpeModel() = default;
  struct MergeValue {
    std::int32_t rank, new_id;
  };
  // Initial symbols of `word` (model-input text) per HF BPE::merge_word.
  void initial_symbols(std::string_view word, std::vector<std::int32_t>& ids) const;
  void merge_all(std::vector<std::int32_t>& ids) const;
  const MergeValue* find_merge(std::int32_t a, std::int32_t b) const;

  FlatStringMap<std::int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_defined_;
  FlatU64Map<MergeValue> merges_;
  BpeOptions options_;
  std::optional<std::int32_t> unk_id_;
  std::int32_t byte_fallback_ids_[256];  // id of "<0xXX>" or -1
  bool all_byte_fallback_ = false;

  static constexpr std::size_t kCacheMaxWordBytes = 256;
  static constexpr std::size_t kCacheCapacity = 1 << 17;
  struct CacheEntry {
    std::uint32_t offset = 0, count = 0;  // ids in cache_ids_
  };
  mutable std::mutex cache_mu_;
  mutable FlatStringMap<CacheEntry> cache_;
  mutable std::vector<std::int32_t> cache_ids_;
};

}  // namespace mamba::tok
