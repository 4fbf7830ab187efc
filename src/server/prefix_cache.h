// PrefixCache: States of prompt prefixes the server has prefilled, kept so that a later prompt
// that begins with the same tokens (the next turn of a chat, a shared system prompt or few-shot
// preamble) starts from a copy instead of prefilling them again.
//
// A Mamba sequence's whole context after n tokens is its fixed-size State (state.h), so one cached
// prefix is one State, whatever its length (llama.cpp's server keeps a slot's state for the same
// reason; a transformer's cache would grow with the prefix). Entries are taken only at positions
// that are multiples of the model's prompt granularity (Mamba-2: chunk_size): a prefill resumed
// from there is bitwise the unsplit prefill (model.h), so a cached answer equals an uncached one.
//
// Bounded by a byte budget (entries × State::nbytes()), least recently used evicted first; States
// are allocated when first needed (an idle server holds none). Not thread-safe: owned by the
// scheduler thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <span>
#include <vector>

#include "mamba/model.h"
#include "mamba/state.h"

namespace mamba::server {

class PrefixCache {
 public:
  /// At most `budget_bytes` / `model.new_state().nbytes()` entries (0: the cache is off). `model`
  /// (not owned) makes the entries' States and must outlive the cache.
  PrefixCache(const Model& model, std::int64_t budget_bytes);

  /// Whether any entry may be kept (budget ≥ one State).
  bool enabled() const { return capacity_ > 0; }
  /// Most entries kept at once.
  std::size_t capacity() const { return capacity_; }
  /// Entries kept now.
  std::size_t size() const { return entries_.size(); }
  /// Bytes of the entries' States now.
  std::int64_t bytes() const { return static_cast<std::int64_t>(entries_.size()) * state_bytes_; }

  /// The longest entry whose ids are a proper prefix of `prompt` (shorter than it: the rest, ≥ 1
  /// token, is prefilled for the prompt's logits), its State copied into `into` (a State of the
  /// same model: State::copy_from). Returns the prefix length, 0 when none fits (`into`
  /// unchanged). A hit makes the entry the most recently used.
  std::size_t restore(std::span<const std::int32_t> prompt, State& into);

  /// Keeps a copy of `state`, the State after exactly the tokens `ids` (non-empty), evicting the
  /// least recently used entry when full. An entry with the same ids is refreshed instead (its
  /// State is the same: a prefill is deterministic). Returns false when the cache is off, or
  /// allocating a State failed (std::bad_alloc: nothing kept, the cache stays as it was).
  bool insert(std::span<const std::int32_t> ids, const State& state);

 private:
  struct Entry {
    std::vector<std::int32_t> ids;
    State state;
  };
  const Model& model_;
  std::int64_t state_bytes_ = 0;
  std::size_t capacity_ = 0;
  std::list<Entry> entries_;  ///< most recently used first
};

}  // namespace mamba::server
