// Unit tests of tokenizer components on small tokenizers built in code: split behaviours, BPE
// merge order, added tokens, Metaspace + byte fallback, post-processing, StreamDecoder.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <utf8proc.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "mamba/tokenizer.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pattern.h"
#include "tokenizer/tiny_tokenizers.h"
#include "tokenizer/unicode.h"

namespace {

using mamba::Tokenizer;
using Ids = std::vector<std::int32_t>;

// HF's documented example: "the-final--countdown" split on '-'.
std::vector<std::string> split_with(mamba::tok::SplitBehavior b) {
  const std::string text = "the-final--countdown";
  std::vector<mamba::tok::Match> matches, kept;
  mamba::tok::SplitPattern::literal("-").find_matches(text, matches);
  mamba::tok::apply_split_behavior(matches, b, false, kept);
  std::vector<std::string> out;
  for (const auto& k : kept) {
    if (k.end > k.begin) out.push_back(text.substr(k.begin, k.end - k.begin));
  }
  return out;
}

TEST(TokenizerComponents, SplitBehavioursMatchHfDocs) {
  using B = mamba::tok::SplitBehavior;
  using V = std::vector<std::string>;
  EXPECT_EQ(split_with(B::kRemoved), (V{"the", "final", "countdown"}));
  EXPECT_EQ(split_with(B::kIsolated), (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split_with(B::kMergedWithPrevious), (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split_with(B::kMergedWithNext), (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split_with(B::kContiguous), (V{"the", "-", "final", "--", "countdown"}));
}

TEST(TokenizerComponents, Utf8LossyMatchesRust) {
  using mamba::tok::utf8_lossy;
  EXPECT_EQ(utf8_lossy("a\xC3"), "a\xEF\xBF\xBD");
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98"), "\xEF\xBF\xBD");          // one maximal subpart
  EXPECT_EQ(utf8_lossy("\xF0\x9F\x98" "A"), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(utf8_lossy("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: each byte
  EXPECT_EQ(utf8_lossy("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_TRUE(mamba::tok::utf8_ends_incomplete("ab\xE2\x82"));
  EXPECT_FALSE(mamba::tok::utf8_ends_incomplete("ab\xE2\x82\xAC"));
}

TEST(TokenizerComponents, ByteLevelBpeMergeOrderAndAddedTokens) {
  auto tok = Tokenizer::from_json_text(mamba::test::tiny_byte_level_json(), "tiny.json");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->size(), 263);
  // "the" → t + he; " the" → Ġt, he → Ġthe (rank 0, then 1, then 2); " thing" → Ġt h ing.
  EXPECT_EQ(*tok->encode("the the thing"), (Ids{'t', 257, 258, 256, 'h', 260}));
  EXPECT_EQ(*tok->encode("a  b"), (Ids{'a', 262, 'b'}));          // normalized added token "  "
  EXPECT_EQ(*tok->encode("x<|endoftext|>y"), (Ids{'x', 261, 'y'}));  // raw special token
  EXPECT_EQ(*tok->encode("e\xCC\x81"), (Ids{0xC3, 0xA9}));         // NFC: e + U+0301 → é
  EXPECT_EQ(*tok->encode(""), Ids{});
  const std::string text = "h\xC3\xA9llo \xF0\x9F\x98\x80\tx\n\n  y";
  EXPECT_EQ(*tok->decode(*tok->encode(text)), text);
  auto bad = tok->encode("ab\xFF");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, mamba::ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("offset 2"), std::string::npos) << bad.error().message;
}

TEST(TokenizerComponents, MetaspaceByteFallbackAndTemplate) {
  auto tok = Tokenizer::from_json_text(mamba::test::tiny_metaspace_json(), "tiny-sp.json");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const std::int32_t kSp = 259, kA = 260, kB = 261, kSpA = 286;
  EXPECT_EQ(*tok->encode("ab a"), (Ids{kSpA, kB, kSpA}));
  EXPECT_EQ(*tok->encode("ab a", true), (Ids{1, kSpA, kB, kSpA}));
  // The post-processor alone, on a text's ids: the BOS before them, the text starting at 1.
  std::size_t text_start = 99;
  EXPECT_EQ(tok->add_special_tokens(Ids{kSpA, kB, kSpA}, &text_start), (Ids{1, kSpA, kB, kSpA}));
  EXPECT_EQ(text_start, 1u);
  EXPECT_EQ(tok->add_special_tokens(Ids{}, &text_start), (Ids{1}));
  EXPECT_EQ(text_start, 1u);
  auto bl = Tokenizer::from_json_text(mamba::test::tiny_byte_level_json());  // (a ByteLevel post-processor adds nothing)
  ASSERT_TRUE(bl.ok());
  EXPECT_EQ(bl->add_special_tokens(Ids{5, 6}, &text_start), (Ids{5, 6}));
  EXPECT_EQ(text_start, 0u);
  EXPECT_EQ(*tok->encode("\xC3\xA9"), (Ids{kSp, 3 + 0xC3, 3 + 0xA9}));  // é by byte fallback
  EXPECT_EQ(*tok->encode("A"), (Ids{kSp, 3 + 'A'}));
  // prepend_scheme "first": no ▁ after an added token.
  EXPECT_EQ(*tok->encode("<s>a"), (Ids{1, kA}));
  EXPECT_EQ(*tok->decode(Ids{kSp, 3 + 0xC3, 3 + 0xA9}), "\xC3\xA9");
  EXPECT_EQ(*tok->decode(Ids{kSpA, kB, kSpA}), "ab a");
  EXPECT_EQ(*tok->decode(Ids{3 + 0xC3}), "\xEF\xBF\xBD");                        // lone lead byte
  EXPECT_EQ(*tok->decode(Ids{3 + 0xC3, 3 + 0xC3}), "\xEF\xBF\xBD\xEF\xBF\xBD");  // one U+FFFD per byte
  EXPECT_EQ(*tok->decode(Ids{1, kSpA}, true), "a");
}

// token_bytes: a token's own bytes (OpenAI's logprobs `bytes`), where decode of the one token turns
// part of a character into U+FFFD; a byte-level encoding's token bytes join into the text's bytes.
TEST(TokenizerComponents, TokenBytesKeepPartsOfCharacters) {
  auto bl = Tokenizer::from_json_text(mamba::test::tiny_byte_level_json());
  auto sp = Tokenizer::from_json_text(mamba::test::tiny_metaspace_json());
  ASSERT_TRUE(bl.ok() && sp.ok());
  EXPECT_EQ(*bl->decode(Ids{0xF0}), "\xEF\xBF\xBD");
  EXPECT_EQ(*bl->token_bytes(0xF0), "\xF0");
  EXPECT_EQ(*bl->token_bytes(258), " the");                       // Ġthe
  EXPECT_EQ(*bl->token_bytes(261), "<|endoftext|>");              // an added (special) token
  EXPECT_EQ(*sp->token_bytes(3 + 0xC3), "\xC3");                  // <0xC3> by byte fallback
  EXPECT_EQ(*sp->decode(Ids{3 + 0xC3}), "\xEF\xBF\xBD");
  EXPECT_EQ(*sp->token_bytes(286), " a");                          // ▁a keeps its space (not a first token)
  EXPECT_EQ(*sp->decode(Ids{286}), "a");                           // where decode drops it, as HF
  const std::string text = "h\xC3\xA9 \xF0\x9F\x98\x80 \xE6\x97\xA5 the thing<|endoftext|>";
  const auto ids = bl->encode(text);
  ASSERT_TRUE(ids.ok());
  std::string joined;
  for (std::int32_t id : *ids) joined += *bl->token_bytes(id);
  EXPECT_EQ(joined, text);
  for (std::int32_t bad : {-1, 263}) {
    auto r = bl->token_bytes(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(std::to_string(bad)), std::string::npos) << r.error().message;
  }
}

// SentencePiece-style decoders drop the first token's leading space (Metaspace with prepend_scheme
// "first"; Llama's Replace/ByteFallback/Fuse/Strip): a token's own text keeps it (" a" for "▁a", as
// llama.cpp's token_to_piece), and a stream given the prompt as context releases the generated
// text as it reads after the prompt (decode(prompt + ids) − decode(prompt)), as TGI and vLLM do.
TEST(TokenizerComponents, TokenTextAndStreamContextKeepLeadingSpaces) {
  auto doc = nlohmann::json::parse(mamba::test::tiny_metaspace_json());
  auto llama = doc;
  llama["decoder"] = nlohmann::json::parse(R"({"type":"Sequence","decoders":[
      {"type":"Replace","pattern":{"String":"\u2581"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},
      {"type":"Strip","content":" ","start":1,"stop":0}]})");
  const std::int32_t kSpA = 286, kB = 261;
  for (const auto& [name, json] : {std::pair{"metaspace", doc}, std::pair{"llama", llama}}) {
    SCOPED_TRACE(name);
    auto made = Tokenizer::from_json_text(json.dump());
    ASSERT_TRUE(made.ok()) << made.error().message;
    const Tokenizer& tok = *made;
    EXPECT_EQ(*tok.decode(Ids{kSpA}), "a");
    EXPECT_EQ(*tok.token_text(kSpA), " a");
    EXPECT_EQ(*tok.token_bytes(kSpA), " a");
    EXPECT_EQ(*tok.token_text(kB), "b");
    EXPECT_EQ(*tok.token_text(3 + 0xC3), "\xEF\xBF\xBD");  // part of a character
    EXPECT_EQ(*tok.token_bytes(3 + 0xC3), "\xC3");
    mamba::StreamDecoder primed(tok, false, Ids{1, kSpA});
    std::string text = *primed.push(kSpA);
    text += *primed.push(kB);
    text += primed.flush();
    EXPECT_EQ(text, " ab");
    EXPECT_EQ(*tok.decode(Ids{kSpA}) + text, *tok.decode(Ids{kSpA, kSpA, kB}));
    mamba::StreamDecoder plain(tok);
    text = *plain.push(kSpA);
    text += *plain.push(kB);
    text += plain.flush();
    EXPECT_EQ(text, "ab");  // no context: decode(ids), the first space dropped
    // Context ending in a byte-fallback run is not used (the run may go on): decode(ids) then.
    mamba::StreamDecoder run(tok, false, Ids{kSpA, 3 + 0xC3});
    text = *run.push(3 + 0xA9);
    text += run.flush();
    EXPECT_EQ(text, *tok.decode(Ids{3 + 0xA9}));
  }
  // A byte-level context ending inside a character is not used either.
  auto bl = Tokenizer::from_json_text(mamba::test::tiny_byte_level_json());
  ASSERT_TRUE(bl.ok());
  mamba::StreamDecoder cut(*bl, false, Ids{'a', 0xF0});
  std::string text = *cut.push(0x9F);
  text += *cut.push('b');
  text += cut.flush();
  EXPECT_EQ(text, *bl->decode(Ids{0x9F, 'b'}));
}

// Feeds ids one at a time; checks every released piece is whole UTF-8 without U+FFFD (when the
// full decode has none) and that the concatenation equals decode(all).
void expect_stream_exact(const Tokenizer& tok, const Ids& ids) {
  mamba::StreamDecoder sd(tok);
  std::string streamed;
  const std::string full = *tok.decode(ids);
  const bool full_has_fffd = full.find("\xEF\xBF\xBD") != std::string::npos;
  for (std::int32_t id : ids) {
    auto piece = sd.push(id);
    ASSERT_TRUE(piece.ok()) << piece.error().message;
    EXPECT_EQ(mamba::tok::utf8_valid_prefix(*piece), piece->size());
    if (!full_has_fffd) {
      EXPECT_EQ(piece->find("\xEF\xBF\xBD"), std::string::npos);
    }
    streamed += *piece;
  }
  streamed += sd.flush();
  EXPECT_EQ(streamed, full);
}

TEST(TokenizerComponents, StreamDecoderReleasesWholeCharacters) {
  auto bl = Tokenizer::from_json_text(mamba::test::tiny_byte_level_json());
  auto sp = Tokenizer::from_json_text(mamba::test::tiny_metaspace_json());
  ASSERT_TRUE(bl.ok() && sp.ok());
  const std::string text = "the \xF0\x9F\x98\x80 caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC ab  a<|endoftext|>z";
  for (const Tokenizer* t : {&*bl, &*sp}) {
    auto ids = t->encode(text);
    ASSERT_TRUE(ids.ok());
    expect_stream_exact(*t, *ids);
  }
  // The emoji's 4 bytes arrive one by one: nothing is released until the last.
  mamba::StreamDecoder sd(*bl);
  EXPECT_EQ(*sd.push('a'), "a");
  EXPECT_EQ(*sd.push(0xF0), "");
  EXPECT_EQ(*sd.push(0x9F), "");
  EXPECT_EQ(*sd.push(0x98), "");
  EXPECT_EQ(*sd.push(0x80), "\xF0\x9F\x98\x80");
  // Bytes no later id can complete are released at once: a lone continuation byte, a lead byte
  // followed by a non-continuation one (decode gives U+FFFD for each such part, whatever follows).
  EXPECT_EQ(*sd.push(0x80), "\xEF\xBF\xBD");
  EXPECT_EQ(*sd.push(0xE6), "");
  EXPECT_EQ(*sd.push('b'), "\xEF\xBF\xBD" "b");
  EXPECT_EQ(*sd.push(0xE6), "");
  EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");  // an unfinished character at the end, as decode gives it
  auto err = sd.push(263);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.error().message.find("263"), std::string::npos);
}

// A run of lead bytes (E2 E2 E2 …) can never form a character before its last byte: each is
// released as U+FFFD when the next arrives (it was held to the end, and each push decoded the whole
// growing run). Text whose released part changes later (a byte-fallback run continuing across a
// skipped special token) is released on its own, never dropped.
TEST(TokenizerComponents, StreamDecoderReleasesLeadByteRunsAndNeverDropsText) {
  auto bl = Tokenizer::from_json_text(mamba::test::tiny_byte_level_json());
  auto sp = Tokenizer::from_json_text(mamba::test::tiny_metaspace_json());
  ASSERT_TRUE(bl.ok() && sp.ok());
  mamba::StreamDecoder sd(*bl);
  EXPECT_EQ(*sd.push('x'), "x");
  EXPECT_EQ(*sd.push(0xE2), "");
  EXPECT_EQ(*sd.push(0xE2), "\xEF\xBF\xBD");
  EXPECT_EQ(*sd.push(0xE2), "\xEF\xBF\xBD");
  EXPECT_EQ(*sd.push('a'), "\xEF\xBF\xBD" "a");
  EXPECT_EQ(*sd.push(0xE2), "");
  EXPECT_EQ(*sd.push(0x82), "");  // E2 82: still a valid beginning
  EXPECT_EQ(*sd.push(0xAC), "\xE2\x82\xAC");  // €
  EXPECT_EQ(sd.flush(), "");
  Ids run(3000, 0xE2);
  std::string streamed;
  for (std::int32_t id : run) streamed += *sd.push(id);
  EXPECT_EQ(streamed.size(), 2999u * 3);  // all but the last, as they come
  streamed += sd.flush();
  EXPECT_EQ(streamed, *bl->decode(run));

  // Skipped <s> (id 1) between the bytes of 好 (E5 A5 BD) and a lone E4: decode(all) reads the
  // four bytes as one invalid run (4 × U+FFFD), but 好 was already released.
  const Ids ids{3 + 0xE5, 3 + 0xA5, 3 + 0xBD, 1, 3 + 0xE4, 286, 261};
  mamba::StreamDecoder skip(*sp, /*skip_special_tokens=*/true);
  std::string text;
  for (std::int32_t id : ids) text += *skip.push(id);
  text += skip.flush();
  EXPECT_EQ(text, "\xE5\xA5\xBD" "\xEF\xBF\xBD" " ab");
  EXPECT_EQ(*sp->decode(ids, true), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" " ab");
  // The same bytes as a prompt (context) ending in the run: the run is cut off the context, so the
  // generated ids are not merged into it, and nothing is lost.
  mamba::StreamDecoder primed(*sp, true, Ids{286, 3 + 0xE5, 3 + 0xA5, 3 + 0xBD, 1});
  text.clear();
  for (std::int32_t id : Ids{3 + 0xE4, 286, 261}) text += *primed.push(id);
  text += primed.flush();
  EXPECT_EQ(text, "\xEF\xBF\xBD" " ab");
  // A prompt ending in "\n" as a byte token (<0x0A>, as Llama's and Mistral's): the context stops
  // before it and still gives the first generated "▁a" its space.
  mamba::StreamDecoder newline(*sp, false, Ids{286, 3 + 0x0A});
  text = *newline.push(286);
  text += *newline.push(261);
  text += newline.flush();
  EXPECT_EQ(text, " ab");
}

TEST(TokenizerComponents, StreamDecoderRandomIdsProperty) {
  auto bl = Tokenizer::from_json_text(mamba::test::tiny_byte_level_json());
  auto sp = Tokenizer::from_json_text(mamba::test::tiny_metaspace_json());
  ASSERT_TRUE(bl.ok() && sp.ok());
  std::mt19937 rng(42);
  for (const Tokenizer* t : {&*bl, &*sp}) {
    for (int trial = 0; trial < 300; ++trial) {
      Ids ids(1 + rng() % 20);
      for (auto& id : ids) id = static_cast<std::int32_t>(rng() % t->size());
      expect_stream_exact(*t, ids);
    }
  }
}

// Long runs of combining marks are put in canonical order by a sort before utf8proc sees them
// (utf8proc's neighbour exchanges are quadratic in a run): the same text as utf8proc alone, in every
// form, on random text of marks of several classes, letters that decompose to marks or compose
// with them, Hangul jamo and a compatibility decomposition of 18 code points.
TEST(TokenizerComponents, NormalizerLongMarkRunsMatchUtf8proc) {
  using mamba::tok::UnicodeForm;
  const char32_t alphabet[] = {U'a', U'e', U'x', 0x301, 0x327, 0x316, 0xF71, 0xF72, 0xF73, 0x344, 0x3099, 0x1100, 0x1161,
                               0x11A8, 0xE9, 0x1E0B, 0xFDFA, 0x5B4, 0x0B47, 0x0B3E};
  std::mt19937 rng(31);
  const std::pair<UnicodeForm, int> forms[] = {
      {UnicodeForm::kNFC, UTF8PROC_STABLE | UTF8PROC_COMPOSE},
      {UnicodeForm::kNFD, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE},
      {UnicodeForm::kNFKC, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT},
      {UnicodeForm::kNFKD, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT}};
  for (int round = 0; round < 200; ++round) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 300);
    const bool marks_only = round % 2 == 0;  // half the rounds: long runs of marks after one letter
    for (int i = 0; i < n; ++i) {
      const char32_t c = marks_only && i > 0 ? alphabet[3 + rng() % 7] : alphabet[rng() % std::size(alphabet)];
      mamba::tok::utf8_append(text, c);
    }
    for (const auto& [form, options] : forms) {
      std::string ours = text;
      mamba::tok::UnicodeNormalizer(form).normalize(ours);
      utf8proc_uint8_t* r = nullptr;
      const utf8proc_ssize_t len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                                static_cast<utf8proc_ssize_t>(text.size()), &r, static_cast<utf8proc_option_t>(options));
      ASSERT_GT(len, 0);
      const std::string want(reinterpret_cast<const char*>(r), static_cast<std::size_t>(len));
      std::free(r);
      ASSERT_EQ(ours, want) << "round " << round << ", form " << static_cast<int>(form);
    }
  }
  // 1 MB of alternating U+0F72 U+0F71 (classes 130, 129): NFC orders them, 129s first. utf8proc
  // alone took 47 s for a quarter of it (quadratic); the bound below only catches that.
  std::string text = "a";
  for (int i = 0; i < 160000; ++i) text += "\xE0\xBD\xB2\xE0\xBD\xB1";
  const auto t0 = std::chrono::steady_clock::now();
  mamba::tok::UnicodeNormalizer(UnicodeForm::kNFC).normalize(text);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
  std::string want = "a";
  for (int i = 0; i < 160000; ++i) want += "\xE0\xBD\xB1";
  for (int i = 0; i < 160000; ++i) want += "\xE0\xBD\xB2";
  EXPECT_TRUE(text == want);
}

}  // namespace
