#include "server/prefix_cache.h"

#include <algorithm>
#include <new>

namespace mamba::server {

PrefixCache::PrefixCache(const Model& model, std::int64_t budget_bytes) : model_(model) {
  state_bytes_ = model.config().state_bytes();
  if (state_bytes_ > 0 && budget_bytes > 0) capacity_ = static_cast<std::size_t>(budget_bytes / state_bytes_);
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

bool PrefixCache::insert(std::span<const std::int32_t> ids, const State& state) {
  if (capacity_ == 0 || ids.empty()) return false;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->ids.size() == ids.size() && std::equal(ids.begin(), ids.end(), it->ids.begin())) {
      entries_.splice(entries_.begin(), entries_, it);
      return true;
    }
  }
  bool reused = false;  // the least recently used entry's State taken for this one (no allocation)
  try {
    if (entries_.size() >= capacity_) {
      entries_.splice(entries_.begin(), entries_, std::prev(entries_.end()));
      reused = true;
      Entry& e = entries_.front();
      e.ids.assign(ids.begin(), ids.end());
      if (!e.state.copy_from(state)) {
        entries_.pop_front();
        return false;
      }
      return true;
    }
    Entry e{std::vector<std::int32_t>(ids.begin(), ids.end()), model_.new_state()};
    if (!e.state.copy_from(state)) return false;
    entries_.push_front(std::move(e));
    return true;
  } catch (const std::bad_alloc&) {
    if (reused) entries_.pop_front();  // its ids may be half assigned: the entry goes
    return false;
  }
}

}  // namespace mamba::server
