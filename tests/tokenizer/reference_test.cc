// Every case of ../shared/fixtures/tokenizer/reference.json (HF tokenizers 0.23 on the
// GPT-NeoX-20B tokenizer): exact ids and exact decode.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "mamba/tokenizer.h"

namespace {

TEST(TokenizerReference, GptNeoxCasesExact) {
  MAMBA_REQUIRE_SHARED(shared);
  const auto ref = nlohmann::json::parse(mamba::test::read_file(shared + "/fixtures/tokenizer/reference.json"));
  auto tok = mamba::Tokenizer::from_file(shared + "/tokenizer/" + ref["tokenizer"].get<std::string>());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  ASSERT_GE(ref["cases"].size(), 41u);
  for (const auto& c : ref["cases"]) {
    const std::string text = c["text"];
    const std::vector<std::int32_t> want = c["ids"];
    auto ids = tok->encode(text);
    ASSERT_TRUE(ids.ok()) << ids.error().message;
    EXPECT_EQ(*ids, want) << "encode of '" << text << "'";
    auto dec = tok->decode(want);
    ASSERT_TRUE(dec.ok()) << dec.error().message;
    EXPECT_EQ(*dec, c["decoded"].get<std::string>()) << "decode of '" << text << "'";
  }
}

TEST(TokenizerReference, GptNeoxSizeAndSpecials) {
  MAMBA_REQUIRE_SHARED(shared);
  auto tok = mamba::Tokenizer::from_file(shared + "/tokenizer/gpt-neox-20b.json");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->size(), 50277);
  EXPECT_TRUE(tok->is_special(0));
  EXPECT_TRUE(tok->is_special(1));
  EXPECT_FALSE(tok->is_special(50276));
  EXPECT_EQ(tok->token_to_id("<|endoftext|>"), 0);
  EXPECT_EQ(tok->id_to_token(12092), "Hello");
  EXPECT_EQ(tok->id_to_token(50280), std::nullopt);
  // Padded vocab rows 50277..50279 are not tokens: decode errors, naming the id.
  for (std::int32_t id : {50277, 50279, -1}) {
    const std::vector<std::int32_t> ids{12092, id};
    auto dec = tok->decode(ids);
    ASSERT_FALSE(dec.ok());
    EXPECT_EQ(dec.error().code, mamba::ErrorCode::kInvalidArgument);
    EXPECT_NE(dec.error().message.find(std::to_string(id)), std::string::npos) << dec.error().message;
  }
  // skip_special_tokens drops <|endoftext|>.
  const std::vector<std::int32_t> ids{66, 0, 67};
  EXPECT_EQ(*tok->decode(ids, true), "ab");
  EXPECT_EQ(*tok->decode(ids, false), "a<|endoftext|>b");
}

}  // namespace
