#include "server/prefix_cache.h"

#include <algorithm>
#include <new>
#include <optional>

namespace mamba::server {

PrefixCache::PrefixCache(const Model& model, std::int64_t budget_bytes) : model_(model) {
  state_bytes_ = model.config().state_bytes();
  budget_ = std::max<std::int64_t>(0, budget_bytes);
}

PrefixCache::Found PrefixCache::lookup(std::span<const std::int32_t> prompt, State& into, bool restore) {
  Found found;
  if (prompt.empty()) return found;
  auto best = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    // the tokens it shares with the prompt, at most all but the prompt's last
    const std::size_t n = std::min(it->ids.size(), prompt.size() - 1);
    const std::size_t same =
        static_cast<std::size_t>(std::mismatch(it->ids.begin(), it->ids.begin() + static_cast<std::ptrdiff_t>(n), prompt.begin()).first -
                                 it->ids.begin());
    found.shared = std::max(found.shared, same);
    if (same == it->ids.size() && (best == entries_.end() || same > best->ids.size())) best = it;  // a proper prefix
  }
  if (!restore || best == entries_.end() || !into.copy_from(best->state)) return found;
  entries_.splice(entries_.begin(), entries_, best);  // most recently used
  found.restored = entries_.front().ids.size();
  return found;
}

bool PrefixCache::insert(std::span<const std::int32_t> ids, const State& state) {
  if (!enabled() || ids.empty() || entry_bytes(ids.size()) > budget_) return false;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->ids.size() == ids.size() && std::equal(ids.begin(), ids.end(), it->ids.begin())) {
      entries_.splice(entries_.begin(), entries_, it);  // the same prefix: the same State
      return true;
    }
  }
  // Least recently used first out until the new entry fits; the last one's State is taken for
  // the new entry (no allocation).
  std::optional<State> spare;
  while (!entries_.empty() && bytes_ + entry_bytes(ids.size()) > budget_) {
    bytes_ -= entry_bytes(entries_.back().ids.size());
    spare = std::move(entries_.back().state);
    entries_.pop_back();
  }
  try {
    Entry e{std::vector<std::int32_t>(ids.begin(), ids.end()), spare ? std::move(*spare) : model_.new_state()};
    if (!e.state.copy_from(state)) return false;
    entries_.push_front(std::move(e));
    bytes_ += entry_bytes(ids.size());
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

}  // namespace mamba::server
