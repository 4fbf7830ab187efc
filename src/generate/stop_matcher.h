// StopMatcher: applies stop strings to streamed text.
//
// Text arrives in pieces (one detokenized delta per generated token). The matcher releases text
// as early as it safely can: it holds back only the longest suffix of the pending text that is a
// proper prefix of some stop string (it could still become a stop), and when a stop string appears
// it releases the text before the earliest match (and the stop string itself when include_stop)
// and drops the rest, also when the stop string spans several tokens. Because any text that could
// start a stop string is always held, a match can never begin inside already-released text.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mamba {

class StopMatcher {
 public:
  /// `stops`: UTF-8 stop strings; empty strings are ignored. `include_stop`: a match releases the
  /// stop string too (TGI), else only the text before it (OpenAI).
  explicit StopMatcher(std::vector<std::string> stops, bool include_stop = false);

  /// Appends `piece`; returns the text now safe to release (possibly empty). After a stop string
  /// matched, stopped() is true and further pushes return "".
  std::string push(std::string_view piece);
  /// Releases whatever is held back (end of generation without a stop).
  std::string flush();
  bool stopped() const { return stopped_; }
  /// The stop string that matched (empty if none).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  std::string matched_;
  bool stopped_ = false;
  bool include_stop_ = false;
};

}  // namespace mamba
