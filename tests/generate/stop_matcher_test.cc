// StopMatcher: text before a stop string kept, the stop never emitted (also across pieces), and
// only a possible stop prefix held back; with include_stop (TGI) the stop string ends the text.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace mamba
