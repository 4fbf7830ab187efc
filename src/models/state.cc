// State: per-sequence conv_state / ssm_state tensors (see include/mamba/state.h).
#include "mamba/state.h"

#include <cstring>

namespace mamba {

void State::reset() {
  for (auto* list : {&conv_state, &ssm_state})
    for (Tensor& t : *list)
      if (t.numel() > 0) std::memset(t.data<void>(), 0, t.nbytes());
  position = 0;
}

State State::clone() const {
  State s;
  s.conv_state.reserve(conv_state.size());
  s.ssm_state.reserve(ssm_state.size());
  for (const Tensor& t : conv_state) s.conv_state.push_back(t.clone());
  for (const Tensor& t : ssm_state) s.ssm_state.push_back(t.clone());
  s.position = position;
  return s;
}

bool State::copy_from(const State& from) {
  if (conv_state.size() != from.conv_state.size() || ssm_state.size() != from.ssm_state.size()) return false;
  for (const auto& [mine, theirs] : {std::pair{&conv_state, &from.conv_state}, std::pair{&ssm_state, &from.ssm_state}})
    for (std::size_t i = 0; i < mine->size(); ++i)
      if ((*mine)[i].nbytes() != (*theirs)[i].nbytes()) return false;
  if (this == &from) return true;
  for (const auto& [mine, theirs] : {std::pair{&conv_state, &from.conv_state}, std::pair{&ssm_state, &from.ssm_state}})
    for (std::size_t i = 0; i < mine->size(); ++i)
      if ((*mine)[i].nbytes() > 0) std::memcpy((*mine)[i].data<void>(), (*theirs)[i].data<void>(), (*mine)[i].nbytes());
  position = from.position;
  return true;
}

std::int64_t State::nbytes() const {
  std::int64_t n = 0;
  for (const auto* list : {&conv_state, &ssm_state})
    for (const Tensor& t : *list) n += static_cast<std::int64_t>(t.nbytes());
  return n;
}

}  // namespace mamba
