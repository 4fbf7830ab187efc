#include "server/prefix_cache.h"

#include <algorithm>
#include <new>
#include <optional>

namespace mamba::server {

PrefixCache::PrefixCache(const Model& model, std::int64_t budget_bytes) : model_(model) {
  state_bytes_ = model.config().state_bytes();
  budget_ = std::max<std::int64_t>(0, budget_bytes);
}

std::size_t PrefixCache::restore(std::span<const std::int32_t> prompt, State& into) {
  auto best = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const std::size_t n = it->ids.size();
    if (n < prompt.size() && (best == entries_.end() || n > best->ids.size()) &&
        std::equal(it->ids.begin(), it->ids.end(), prompt.begin()))
      best = it;
  }
  if (best == entries_.end() || !into.copy_from(best->state)) return 0;
  entries_.splice(entries_.begin(), entries_, best);  // most recently used
  return entries_.front().ids.size();
}

std::size_t PrefixCache::shared_prefix(std::span<const std::int32_t> prompt) const {
  if (prompt.empty()) return 0;
  std::size_t most = 0;
  for (const Entry& e : entries_) {
    const std::size_t n = std::min(e.ids.size(), prompt.size() - 1);
    const auto mismatch = std::mismatch(e.ids.begin(), e.ids.begin() + static_cast<std::ptrdiff_t>(n), prompt.begin());
    most = std::max(most, static_cast<std::size_t>(mismatch.first - e.ids.begin()));
  }
  return most;
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
