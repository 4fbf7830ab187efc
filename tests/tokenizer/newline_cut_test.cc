// A long text is encoded in pieces cut after a '\n' between two visible ASCII characters
// (tokenizer/newline_cut.h) where the pipeline allows it: the pieces' ids must be the whole text's
// at every such cut, and nowhere else may a cut be taken. Checked here at EVERY cut point of many
// short texts (whose own encode runs whole), against the embedded model's tokenizer and
// GPT-NeoX-20B's; the npm differential test checks long texts (cut every 64 KiB) against HF.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/test_util.h"
#include "mamba/tokenizer.h"
#include "tokenizer/newline_cut.h"
#include "tokenizer/text_gen.h"

namespace {

using mamba::tok::newline_cut_after;

/// The pieces newline_cut_after makes of `text` when it may cut anywhere (min_bytes 0).
std::vector<std::string> all_cuts(const std::string& text) {
  std::vector<std::string> pieces;
  for (std::size_t b = 0; b < text.size();) {
    const std::size_t e = newline_cut_after(text, b, text.size(), 0);
    pieces.push_back(text.substr(b, e - b));
    b = e;
  }
  return pieces;
}

TEST(NewlineCut, OnlyAfterANewlineBetweenVisibleAsciiCharacters) {
  auto cuts = [](const std::string& t) {
    std::vector<std::size_t> at;
    for (std::size_t b = 0; b < t.size();) at.push_back(b = newline_cut_after(t, b, t.size(), 0));
    return at;
  };
  EXPECT_EQ(cuts("ab\ncd"), (std::vector<std::size_t>{3, 5}));
  EXPECT_EQ(cuts("a.\n'sx\n1"), (std::vector<std::size_t>{3, 7, 8}));
  // Never inside or beside whitespace runs, before a combining mark or other non-ASCII, at either end.
  for (const std::string t : {"a \nb", "a\n b", "a\n\nb", "a\r\nb", "\nab", "ab\n", "a\n\xCC\x81", "\xC3\xA9\nb", "a\t\nb"})
    EXPECT_EQ(cuts(t), std::vector<std::size_t>{t.size()}) << t;
  // min_bytes: the first cut at or after begin + min_bytes; none when the rest is that short.
  const std::string t = "aa\nbb\ncc\ndd";
  EXPECT_EQ(newline_cut_after(t, 0, t.size(), 4), 6u);
  EXPECT_EQ(newline_cut_after(t, 3, t.size(), 4), 9u);
  EXPECT_EQ(newline_cut_after(t, 0, t.size(), t.size()), t.size());
  EXPECT_EQ(newline_cut_after(t, 0, 5, 1), 3u);  // within [begin, end) only
  EXPECT_EQ(newline_cut_after(t, 0, 3, 1), 3u);  // a '\n' at end - 1 has no next character there
}

/// encode of each piece, joined, is encode of the whole, for every text.
void expect_pieces_encode_as_whole(const mamba::Tokenizer& tok, const std::vector<std::string>& texts) {
  int cut_texts = 0;
  for (const std::string& text : texts) {
    ASSERT_LT(text.size(), mamba::tok::kNewlineCutBytes);  // encoded whole below
    auto whole = tok.encode(text);
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    const std::vector<std::string> pieces = all_cuts(text);
    cut_texts += pieces.size() > 1;
    std::vector<std::int32_t> joined;
    for (const std::string& p : pieces) {
      auto ids = tok.encode(p);
      ASSERT_TRUE(ids.ok()) << ids.error().message;
      joined.insert(joined.end(), ids->begin(), ids->end());
    }
    ASSERT_EQ(joined, *whole) << "cut into " << pieces.size() << " pieces: '" << text << "'";
  }
  EXPECT_GT(cut_texts, static_cast<int>(texts.size()) / 4) << "too few texts had a cut to test";
}

std::vector<std::string> texts_with_lines() {
  std::vector<std::string> texts = mamba::test::generate_documents(20261205, 600, 2000);
  // Line ends that meet as contractions, digits, punctuation, markers and whitespace do.
  for (const char* t : {"it\n's", "x\n'll be\n'd", "1\n2\n3.5\n.6", "end.\n!start", "a\n<|endoftext|>\nb", "a \n\nb\n c",
                        "a\n\n\nb\nc", "tab\t\nx\ny", "caf\xC3\xA9\nx\ny\n\xCC\x81z", "<p>\n</p>\n{\n}\n", "a\r\nb\nc"})
    texts.emplace_back(t);
  return texts;
}

TEST(NewlineCut, PiecesEncodeAsTheWholeEmbeddedTokenizer) {
  auto tok = mamba::Tokenizer::from_file(mamba::test::source_dir() + "/models/mamba2-books-7m-bpe8k/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  expect_pieces_encode_as_whole(*tok, texts_with_lines());
}

TEST(NewlineCut, PiecesEncodeAsTheWholeGptNeox) {
  MAMBA_REQUIRE_SHARED(shared);
  auto tok = mamba::Tokenizer::from_file(shared + "/tokenizer/gpt-neox-20b.json");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  expect_pieces_encode_as_whole(*tok, texts_with_lines());
}

}  // namespace
