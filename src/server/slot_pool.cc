#include "server/slot_pool.h"

#include <algorithm>

namespace mamba::server {

SlotPool::SlotPool(const Model& model, int slots) {
  states_.reserve(static_cast<std::size_t>(slots));
  for (int i = 0; i < slots; ++i) states_.push_back(model.new_state());
  for (int i = slots - 1; i >= 0; --i) free_.push_back(i);
}

int SlotPool::acquire() {
  int i = free_.back();
  free_.pop_back();
  return i;
}

void SlotPool::release(int i) {
  states_[static_cast<std::size_t>(i)].reset();
  free_.push_back(i);
  // keep low indices first so a lightly loaded server touches few States
  std::sort(free_.begin(), free_.end(), std::greater<int>());
}

int slots_for_budget(std::int64_t budget_bytes, std::int64_t state_bytes, int max_concurrent) {
  if (state_bytes <= 0) return max_concurrent;
  std::int64_t n = budget_bytes / state_bytes;
  return static_cast<int>(std::min<std::int64_t>(n, max_concurrent));
}

std::int64_t slots_bytes_for_budget(std::int64_t budget_bytes, std::int64_t state_bytes, int max_concurrent) {
  if (state_bytes <= 0) return 0;
  return std::max<std::int64_t>(0, slots_for_budget(budget_bytes, state_bytes, max_concurrent)) * state_bytes;
}

}  // namespace mamba::server
