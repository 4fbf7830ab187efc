#include "generate/stop_matcher.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace mamba {

Status validate_stop_strings(const std::vector<std::string>& stops, const Tokenizer* tok) {
  for (std::size_t i = 0; i < stops.size(); ++i)
    if (stops[i].empty())
      return make_error(ErrorCode::kInvalidArgument, fmt::format("stop string {} is empty (it would stop before the first token)", i));
  if (!stops.empty() && tok == nullptr)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} stop string(s) given without a tokenizer: they are matched in the decoded text, "
                                  "which needs one", stops.size()));
  return {};
}

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop) : include_stop_(include_stop) {
  for (auto& s : stops) {
    if (s.empty()) continue;
    Stop stop;
    stop.text = std::move(s);
    const std::string& t = stop.text;
    stop.fail.assign(t.size(), 0);
    std::size_t k = 0;
    for (std::size_t i = 1; i < t.size(); ++i) {
      while (k > 0 && t[i] != t[k]) k = stop.fail[k - 1];
      if (t[i] == t[k]) ++k;
      stop.fail[i] = static_cast<std::uint32_t>(k);
    }
    stops_.push_back(std::move(stop));
  }
}

std::string StopMatcher::push(std::string_view piece) {
  if (stopped_) return {};
  const std::size_t base = pending_.size();
  pending_.append(piece);
  if (stops_.empty()) return std::exchange(pending_, {});

  // Earliest complete match (the longest stop string wins a tie at the same position). A match ends
  // in `piece`: one ending before it would have stopped an earlier push. Each automaton runs to its
  // own first match in `piece`; another stop string's may start earlier though it ends later.
  std::size_t best = std::string::npos;
  for (auto& s : stops_) {
    const std::string& t = s.text;
    std::size_t k = s.state;
    for (std::size_t i = 0; i < piece.size(); ++i) {
      const char c = piece[i];
      while (k > 0 && c != t[k]) k = s.fail[k - 1];
      if (c == t[k]) ++k;
      if (k == t.size()) {
        const std::size_t pos = base + i + 1 - t.size();
        if (pos < best || (pos == best && t.size() > matched_.size())) {
          best = pos;
          matched_ = t;
        }
        break;
      }
    }
    s.state = k;
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, include_stop_ ? best + matched_.size() : best);
    pending_.clear();
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of a stop string: the largest state.
  std::size_t hold = 0;
  for (const auto& s : stops_) hold = std::max(hold, s.state);
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  return std::exchange(pending_, {});
}

}  // namespace mamba
