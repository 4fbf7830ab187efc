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
// Which prefixes are kept is the scheduler's choice: a prompt's last whole granule short of its
// end (a repeated prompt, the next turn of a chat) and the point where it parts from the kept
// prefix it shares most with (lookup()'s `shared`: a system prompt or few-shot preamble common to
// prompts that differ after it is kept from the second such prompt on, as a radix tree's branch).
//
// Bounded by a byte budget — each entry's State::nbytes() plus its ids (4 bytes a token: a 60000-
// token prefix of a small Mamba-1 model is as large as its state) — least recently used evicted
// first; States are allocated when first needed (an idle server holds none). Not thread-safe:
// owned by the scheduler thread.
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
  /// Entries of at most `budget_bytes` in all (0, or less than one State: the cache is off).
  /// `model` (not owned) makes the entries' States and must outlive the cache.
  PrefixCache(const Model& model, std::int64_t budget_bytes);

  /// Whether any entry may be kept (budget ≥ one State).
  bool enabled() const { return budget_ >= state_bytes_ && state_bytes_ > 0; }
  /// Entries kept now.
  std::size_t size() const { return entries_.size(); }
  /// Bytes of the entries now: their States and their ids (≤ the budget).
  std::int64_t bytes() const { return bytes_; }

  /// What lookup() found for a prompt.
  struct Found {
    std::size_t restored = 0;  ///< tokens whose State was copied into `into` (0: none fits)
    /// The most leading tokens the prompt shares with any entry's ids (at most prompt.size() − 1):
    /// where a new entry would let the next prompt that shares them start from the cache.
    std::size_t shared = 0;
  };
  /// One pass over the entries: the longest whose ids are a proper prefix of `prompt` (shorter than
  /// it: the rest, ≥ 1 token, is prefilled for the prompt's logits) has its State copied into
  /// `into` (a State of the same model: State::copy_from) when `restore`, and becomes the most
  /// recently used; `into` is unchanged otherwise.
  Found lookup(std::span<const std::int32_t> prompt, State& into, bool restore);

  /// Keeps a copy of `state`, the State after exactly the tokens `ids` (non-empty), evicting the
  /// least recently used entries until it fits the budget (one larger than the budget alone is
  /// not kept). An entry with the same ids is refreshed instead (its
  /// State is the same: a prefill is deterministic). Returns false when the cache is off, or
  /// allocating a State failed (std::bad_alloc: nothing kept, the cache stays as it was).
  bool insert(std::span<const std::int32_t> ids, const State& state);

 private:
  struct Entry {
    std::vector<std::int32_t> ids;
    State state;
  };
  /// Bytes an entry of `n` ids counts.
  std::int64_t entry_bytes(std::size_t n) const { return state_bytes_ + static_cast<std::int64_t>(n * sizeof(std::int32_t)); }

  const Model& model_;
  std::int64_t state_bytes_ = 0;
  std::int64_t budget_ = 0;
  std::int64_t bytes_ = 0;
  std::list<Entry> entries_;  ///< most recently used first
};

}  // namespace mamba::server
