// NormalizedOffsets: token offsets in the tokenizer's NFC text mapped back to the client's input.
#include <gtest/gtest.h>

#include <string>

#include "server/normalized_offsets.h"

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

TEST(NormalizedOffsets, IdentityWhenUnchangedOrNotSegmentwiseNfc) {
  const NormalizedOffsets same("plain text", "plain text");
  EXPECT_FALSE(same.mapped());
  EXPECT_EQ(same.start(5), 5u);
  EXPECT_EQ(same.stop(99), 10u);  // clamped to the input
  // Hangul jamo L + V are both starters that compose: not segment-wise NFC, offsets as they were.
  const NormalizedOffsets jamo("\xE1\x84\x80\xE1\x85\xA1", "\xEA\xB0\x80");
  EXPECT_FALSE(jamo.mapped());
  EXPECT_EQ(jamo.stop(3), 3u);
  // Another normaliser's output (a prepended "▁"): identity.
  const NormalizedOffsets other("hi", "\xE2\x96\x81hi");
  EXPECT_FALSE(other.mapped());
}

}  // namespace
}  // namespace mamba::server
