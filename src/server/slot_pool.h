// SlotPool: the per-sequence States of the server, allocated once at start and reused.
//
// A Mamba sequence's whole context is its fixed-size State (state.h), so the server's memory for
// sequences is slots × State::nbytes(), known up front. Not thread-safe: owned by the scheduler
// thread.
#pragma once

#include <cstdint>
#include <vector>

#include "mamba/model.h"
#include "mamba/state.h"

namespace mamba::server {

class SlotPool {
 public:
  /// Allocates `slots` zeroed States from `model.new_state()` (slots ≥ 1).
  SlotPool(const Model& model, int slots);
  int size() const { return static_cast<int>(states_.size()); }
  int in_use() const { return size() - static_cast<int>(free_.size()); }
  bool has_free() const { return !free_.empty(); }
  /// Index of a free, zeroed slot. Precondition: has_free().
  int acquire();
  /// Returns slot `i` to the pool (zeroes its State for the next sequence).
  void release(int i);
  State& state(int i) { return states_[static_cast<std::size_t>(i)]; }

 private:
  std::vector<State> states_;
  std::vector<int> free_;  ///< stack of free indices (lowest index handed out first)
};

/// Slots that fit: min(max_concurrent, budget_bytes / state_bytes), at least 1 if one fits,
/// 0 when even one State exceeds the budget.
int slots_for_budget(std::int64_t budget_bytes, std::int64_t state_bytes, int max_concurrent);
/// Bytes of the slots slots_for_budget gives (what Server::create allocates): its count × state_bytes,
/// 0 when state_bytes ≤ 0. mamba-server passes it as LoadOptions::reserve_bytes before the load.
std::int64_t slots_bytes_for_budget(std::int64_t budget_bytes, std::int64_t state_bytes, int max_concurrent);

}  // namespace mamba::server
