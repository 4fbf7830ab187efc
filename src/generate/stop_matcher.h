// StopMatcher: applies stop strings to streamed text.
//
// Text arrives in pieces (one detokenized delta per generated token). The matcher releases text
// as early as it safely can: it holds back only the longest suffix of the pending text that is a
// proper prefix of some stop string (it could still become a stop), and when a stop string appears
// it releases the text before the earliest match (and the stop string itself when include_stop)
// and drops the rest, also when the stop string spans several tokens. Because any text that could
// start a stop string is always held, a match can never begin inside already-released text.
//
// Each stop string is matched by a Knuth–Morris–Pratt automaton whose state is the held prefix's
// length, so a push costs O(piece) per stop string however long the stop strings and the held text
// are (a request's stop strings may be megabytes: searching the whole held text for each, and
// trying every suffix length, made one such request cost minutes of CPU per token).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mamba/status.h"

namespace mamba {

class Tokenizer;

/// Checks a generation's stop strings (GenerateOptions::stop): none empty (it would stop before
/// the first token; mamba-cli's --stop and both server routes refuse one too), and a tokenizer
/// to decode the text they are matched in when there are any (without one, none could ever match).
/// kInvalidArgument naming the fault otherwise.
Status validate_stop_strings(const std::vector<std::string>& stops, const Tokenizer* tok);

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
  struct Stop {
    std::string text;
    /// KMP failure function: fail[i] = length of the longest proper prefix of text[0..i] that is
    /// also its suffix (stop strings come from a request body or a command line: below 4 GiB).
    std::vector<std::uint32_t> fail;
    /// Length of the longest suffix of the text pushed so far that is a prefix of `text`.
    std::size_t state = 0;
  };
  std::vector<Stop> stops_;
  std::string pending_;
  std::string matched_;
  bool stopped_ = false;
  bool include_stop_ = false;
};

}  // namespace mamba
