// StopMatcher: text before a stop string kept, the stop never emitted (also across pieces), and
// only a possible stop prefix held back; with include_stop (TGI) the stop string ends the text.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "generate/stop_matcher.h"

namespace mamba {
namespace {

TEST(StopMatcher, NoStopsReleasesImmediately) {
  StopMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, StopInsideOnePiece) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("hello STOP world"), "hello ");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "STOP");
  EXPECT_EQ(m.push("more"), "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, StopSpanningPieces) {
  StopMatcher m({"STOP"});
  std::string out;
  out += m.push("hel");
  EXPECT_EQ(out, "hel");
  out += m.push("lo S");
  EXPECT_EQ(out, "hello ") << "only the possible stop prefix 'S' is held";
  out += m.push("TO");
  EXPECT_EQ(out, "hello ");
  out += m.push("P and more");
  EXPECT_EQ(out, "hello ");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, HeldPrefixReleasedWhenItDiverges) {
  StopMatcher m({"abc"});
  EXPECT_EQ(m.push("xa"), "x");
  EXPECT_EQ(m.push("b"), "");
  EXPECT_EQ(m.push("d"), "abd");
  EXPECT_EQ(m.push("ab"), "");
  EXPECT_EQ(m.flush(), "ab");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, HoldsLongestPossiblePrefixOverlap) {
  // "aab" ends with "a" and "aa"... stop "aac": suffix "a" of "aba" is a prefix → hold 1.
  StopMatcher m({"aac"});
  EXPECT_EQ(m.push("aba"), "ab");
  EXPECT_EQ(m.push("a"), "");  // "aa" held
  EXPECT_EQ(m.push("a"), "a");  // "aaa": hold "aa"
  EXPECT_EQ(m.push("c"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(m.push("hello world"), "hel");
  EXPECT_EQ(m.matched(), "lo w");
}

TEST(StopMatcher, MultiByteUtf8Stop) {
  StopMatcher m({"\xE2\x80\x9D"});  // ” (3 bytes)
  std::string out;
  out += m.push("said \xE2\x80\x9C" "Hi");
  out += m.push("!\xE2\x80");
  EXPECT_EQ(out, "said \xE2\x80\x9C" "Hi!");
  out += m.push("\x9D then");
  EXPECT_EQ(out, "said \xE2\x80\x9C" "Hi!");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, NewlineStopAtStart) {
  StopMatcher m({"\n"});
  EXPECT_EQ(m.push("\nabc"), "");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, IncludeStopEndsTheTextWithIt) {
  StopMatcher m({"STOP", "ST"}, /*include_stop=*/true);
  std::string out;
  out += m.push("hello S");
  EXPECT_EQ(out, "hello ");
  out += m.push("TOP and more");  // the longest stop at the earliest position; what follows dropped
  EXPECT_EQ(out, "hello STOP");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "STOP");
  EXPECT_EQ(m.flush(), "");
  StopMatcher n({"\n"}, true);
  EXPECT_EQ(n.push("\nabc"), "\n");
}

// The matcher's definition, spelled out naively: search the held text for each stop string, hold the
// longest suffix that is a proper prefix of one.
struct NaiveStopMatcher {
  std::vector<std::string> stops;
  bool include_stop;
  std::string pending;
  bool stopped = false;
  std::string push(const std::string& piece) {
    if (stopped) return {};
    pending += piece;
    std::size_t best = std::string::npos;
    std::string matched;
    for (const auto& s : stops) {
      const std::size_t pos = pending.find(s);
      if (pos != std::string::npos && (pos < best || (pos == best && s.size() > matched.size()))) {
        best = pos;
        matched = s;
      }
    }
    if (best != std::string::npos) {
      stopped = true;
      return pending.substr(0, include_stop ? best + matched.size() : best);
    }
    std::size_t hold = 0;
    for (const auto& s : stops) {
      for (std::size_t len = std::min(s.size() - 1, pending.size()); len > hold; --len) {
        if (pending.compare(pending.size() - len, len, s, 0, len) == 0) {
          hold = len;
          break;
        }
      }
    }
    std::string out = pending.substr(0, pending.size() - hold);
    pending.erase(0, pending.size() - hold);
    return out;
  }
};

TEST(StopMatcher, SameAsTheNaiveDefinitionOnRandomText) {
  std::mt19937 rng(7);
  const auto rand_string = [&](std::size_t max_len) {
    std::string s(1 + rng() % max_len, 'a');
    for (auto& c : s) c = static_cast<char>('a' + rng() % 3);  // a small alphabet: many partial matches
    return s;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops;
    for (std::uint32_t i = 0, n = 1 + rng() % 4; i < n; ++i) stops.push_back(rand_string(6));
    const bool include = trial % 2 == 1;
    StopMatcher m(stops, include);
    NaiveStopMatcher ref{stops, include, {}};
    for (int p = 0; p < 12; ++p) {
      const std::string piece = rng() % 5 == 0 ? std::string() : rand_string(4);
      ASSERT_EQ(m.push(piece), ref.push(piece)) << "trial " << trial << " push " << p;
      ASSERT_EQ(m.stopped(), ref.stopped);
    }
    if (!ref.stopped) {
      EXPECT_EQ(m.flush(), ref.pending);
    }
  }
}

TEST(StopMatcher, LongStopStringsCostLinearTime) {
  // A client's stop strings may fill the 8 MiB body. A model forced (logit_bias) to repeat a token
  // of 32 spaces against stops of 160 000 spaces and of 40 000 spaces + "x": searching the held text
  // for each stop and trying every suffix length took ~100 s of a server's scheduler for 5000 tokens
  // (0.8 s without stops; every other request stalled with it), cubic in the stop length.
  StopMatcher m({std::string(160000, ' '), std::string(40000, ' ') + "x"});
  const std::string piece(32, ' ');
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t released = 0;
  for (int i = 0; i < 4999; ++i) released += m.push(piece).size();
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(released, 0u) << "every space could still start the 160 000-space stop";
  EXPECT_EQ(m.push(piece), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched().size(), 160000u);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0) << "5000 pushes against long stop strings took " << s << " s";
}

}  // namespace
}  // namespace mamba
