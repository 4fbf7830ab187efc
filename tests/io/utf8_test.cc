// core/utf8.h: cutting text without splitting a character, and counting characters as OpenAI's
// text_offset and TGI's x-compute-characters do.
#include <gtest/gtest.h>

#include <string>

#include "core/utf8.h"

namespace mamba {
namespace {

TEST(Utf8, CutStepsBackToACharacterStart) {
  const std::string s = "ab\xC3\xA9" "c\xE2\x82\xAC" "d\xF0\x9F\x98\x80";  // ab é c € d 😀
  EXPECT_EQ(utf8_cut(s, 0), 0u);
  EXPECT_EQ(utf8_cut(s, 2), 2u);
  EXPECT_EQ(utf8_cut(s, 3), 2u);   // inside é
  EXPECT_EQ(utf8_cut(s, 4), 4u);
  EXPECT_EQ(utf8_cut(s, 6), 5u);   // inside €
  EXPECT_EQ(utf8_cut(s, 7), 5u);
  EXPECT_EQ(utf8_cut(s, 11), 9u);  // inside 😀: back 2
  EXPECT_EQ(utf8_cut(s, 12), 9u);  // back 3
  EXPECT_EQ(utf8_cut(s, 13), 13u); // the end
  EXPECT_EQ(utf8_cut(s, 100), 13u);
  // Bytes that are not UTF-8: at most 3 steps back.
  EXPECT_EQ(utf8_cut(std::string(10, '\x80'), 8), 5u);
}

TEST(Utf8, CharCountCountsCodePoints) {
  EXPECT_EQ(utf8_char_count(""), 0u);
  EXPECT_EQ(utf8_char_count("abc"), 3u);
  EXPECT_EQ(utf8_char_count("ab\xC3\xA9" "c\xE2\x82\xAC" "d\xF0\x9F\x98\x80"), 7u);
}

}  // namespace
}  // namespace mamba
