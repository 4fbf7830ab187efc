// NormalizedOffsets: token offsets in the tokenizer's NFC text mapped back to the client's input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include <utf8proc.h>

#include "server/normalized_offsets.h"
#include "tokenizer/normalizer.h"

namespace mamba::server {
namespace {

TEST(NormalizedOffsets, NfcChangedInputMapsSegmentBounds) {
  // "e" + U+0301 (3 bytes) is "é" (2 bytes) in NFC: later offsets move by one byte.
  const std::string input = "e\xCC\x81 caf\xC3\xA9", nfc = "\xC3\xA9 caf\xC3\xA9";
  const NormalizedOffsets m(input, nfc);
  ASSERT_TRUE(m.mapped());
  EXPECT_EQ(m.start(0), 0u);
  EXPECT_EQ(m.stop(2), 3u);   // end of "é" → end of "e" + U+0301
  EXPECT_EQ(m.start(2), 3u);  // " caf…" starts where the input's does
  EXPECT_EQ(m.stop(nfc.size()), input.size());
  EXPECT_EQ(m.start(1), 0u);  // inside a segment: its start, or its end for a stop
  EXPECT_EQ(m.stop(1), 3u);
}

// Hangul jamo L + V (+ T) are starters that compose with each other: one segment, the syllable's
// bounds in the input. "a" + L V + " " + L V T + "b" → "a가 각b".
TEST(NormalizedOffsets, HangulJamoThatComposeFormOneSegment) {
  const std::string input = "a\xE1\x84\x80\xE1\x85\xA1 \xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8" "b";
  const std::string nfc = "a\xEA\xB0\x80 \xEA\xB0\x81" "b";
  const NormalizedOffsets m(input, nfc);
  ASSERT_TRUE(m.mapped());
  EXPECT_EQ(m.start(1), 1u);   // 가 starts after "a"
  EXPECT_EQ(m.stop(4), 7u);    // and ends after both jamo (3 + 3 bytes)
  EXPECT_EQ(m.start(4), 7u);   // " "
  EXPECT_EQ(m.start(5), 8u);   // 각: L V T, 9 bytes of input
  EXPECT_EQ(m.stop(8), 17u);
  EXPECT_EQ(m.start(8), 17u);  // "b"
  EXPECT_EQ(m.stop(9), 18u);
  EXPECT_EQ(m.stop(2), 7u);    // inside the syllable: its end for a stop, its start for a start
  EXPECT_EQ(m.start(2), 1u);
  // Two L jamo in a row do not compose: L | L V, each its own segment.
  const NormalizedOffsets ll("\xE1\x84\x80\xE1\x84\x80\xE1\x85\xA1", "\xE1\x84\x80\xEA\xB0\x80");
  ASSERT_TRUE(ll.mapped());
  EXPECT_EQ(ll.stop(3), 3u);
  EXPECT_EQ(ll.start(3), 3u);
  EXPECT_EQ(ll.stop(6), 9u);
  // A two-part vowel sign (Bengali E + AA, both starters, compose to O).
  const NormalizedOffsets beng("\xE0\xA6\x95\xE0\xA7\x87\xE0\xA6\xBE", "\xE0\xA6\x95\xE0\xA7\x8B");
  ASSERT_TRUE(beng.mapped());
  EXPECT_EQ(beng.start(3), 3u);
  EXPECT_EQ(beng.stop(6), 9u);
}

// Starters that keep merging into one segment (U+0F73 decomposes to two marks, so NFC reorders it
// with the marks before it) are tested against at most a short segment: 8 000 of them (24 KB of
// prompt) map in about a second (the unbounded test was cubic: 6 KB took 38 s, so this would run
// past ctest's timeout), and offsets stay within the input. (NFC's own reordering of the one long run of
// marks is quadratic, in the tokenizer as here.)
TEST(NormalizedOffsets, LongRunsOfMergingStartersStayLinear) {
  std::string input = "\xE0\xBD\x80";  // U+0F40
  for (int i = 0; i < 8000; ++i) input += "\xE0\xBD\xB3";  // U+0F73
  std::string nfc;
  {
    utf8proc_uint8_t* r = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(input.data()), static_cast<utf8proc_ssize_t>(input.size()),
                                &r, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    ASSERT_GT(n, 0);
    nfc.assign(reinterpret_cast<const char*>(r), static_cast<std::size_t>(n));
    std::free(r);
  }
  ASSERT_NE(nfc, input);
  const NormalizedOffsets m(input, nfc);
  for (std::size_t n : {std::size_t{0}, std::size_t{3}, nfc.size() / 2, nfc.size()}) {
    EXPECT_LE(m.start(n), input.size());
    EXPECT_LE(m.stop(n), input.size());
  }
  EXPECT_EQ(m.stop(nfc.size()), input.size());
  // One letter and 320 000 marks of alternating classes (1 MB): one segment, put in NFC by the
  // tokenizer's normalizer (utf8proc alone reorders such a run in quadratic time: hours).
  std::string marks = "a";
  for (int i = 0; i < 160000; ++i) marks += "\xE0\xBD\xB2\xE0\xBD\xB1";  // U+0F72 U+0F71
  std::string marks_nfc = marks;
  tok::UnicodeNormalizer(tok::UnicodeForm::kNFC).normalize(marks_nfc);
  const NormalizedOffsets one(marks, marks_nfc);
  ASSERT_TRUE(one.mapped());
  EXPECT_EQ(one.start(4), 0u);
  EXPECT_EQ(one.stop(4), marks.size());
}

TEST(NormalizedOffsets, IdentityWhenUnchangedOrNotSegmentwiseNfc) {
  const NormalizedOffsets same("plain text", "plain text");
  EXPECT_FALSE(same.mapped());
  EXPECT_EQ(same.start(5), 5u);
  EXPECT_EQ(same.stop(99), 10u);  // clamped to the input
  // Another normaliser's output (a prepended "▁"): identity.
  const NormalizedOffsets other("hi", "\xE2\x96\x81hi");
  EXPECT_FALSE(other.mapped());
}

}  // namespace
}  // namespace mamba::server
