#include "generate/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace mamba {

StopMatcher::StopMatcher(std::vector<std::string> stops, bool include_stop) : include_stop_(include_stop) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(std::string_view piece) {
  if (stopped_) return {};
  pending_.append(piece);
  if (stops_.empty()) return std::exchange(pending_, {});

  // Earliest complete match (the longest stop string wins a tie at the same position).
  std::size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const std::size_t pos = pending_.find(s);
    if (pos == std::string::npos) continue;
    if (pos < best || (pos == best && s.size() > matched_.size())) {
      best = pos;
      matched_ = s;
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, include_stop_ ? best + matched_.size() : best);
    pending_.clear();
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of a stop string.
  std::size_t hold = 0;
  for (const auto& s : stops_) {
    const std::size_t max_len = std::min(s.size() - 1, pending_.size());
    for (std::size_t len = max_len; len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) == std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  if (stopped_) return {};
  return std::exchange(pending_, {});
}

}  // namespace mamba
