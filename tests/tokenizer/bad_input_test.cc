// Bad tokenizer.json inputs: each a clear error (code + message naming the field / component),
// never a crash; truncations of a real tokenizer.json at many points.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "mamba/tokenizer.h"
#include "tokenizer/tiny_tokenizers.h"

namespace {

using mamba::ErrorCode;
using nlohmann::json;

void expect_error(const std::string& text, ErrorCode code, const std::string& needle) {
  auto tok = mamba::Tokenizer::from_json_text(text, "bad.json");
  ASSERT_FALSE(tok.ok()) << "accepted: " << text.substr(0, 200);
  EXPECT_EQ(tok.error().code, code) << tok.error().message;
  EXPECT_NE(tok.error().message.find(needle), std::string::npos) << "message lacks '" << needle << "': " << tok.error().message;
  EXPECT_NE(tok.error().message.find("bad.json"), std::string::npos) << tok.error().message;
}

json base() { return json::parse(mamba::test::tiny_byte_level_json()); }

TEST(TokenizerBadInput, Errors) {
  expect_error("{", ErrorCode::kFormat, "invalid JSON: parse error at line 1, column 2");
  // Nesting past core/bounded_json.h's bound (a dump of such a value recursed once per level).
  expect_error(R"({"model": )" + std::string(300000, '[') + std::string(300000, ']') + "}", ErrorCode::kFormat,
               "invalid JSON: arrays and objects nested more than 256 levels deep");
  expect_error("[1, 2]", ErrorCode::kFormat, "expected an object");
  auto j = base();
  j.erase("model");
  expect_error(j.dump(), ErrorCode::kFormat, "missing field 'model'");
  j = base();
  j["model"]["type"] = "WordPiece";
  expect_error(j.dump(), ErrorCode::kUnsupported, "'WordPiece'");
  j = base();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error(j.dump(), ErrorCode::kUnsupported, "normalizer.type 'Lowercase'");
  j = base();
  j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {{{"type", "BertPreTokenizer"}}}}};
  expect_error(j.dump(), ErrorCode::kUnsupported, "pre_tokenizer.pretokenizers[0].type 'BertPreTokenizer'");
  j = base();
  j["decoder"] = {{"type", "WordPiece"}};
  expect_error(j.dump(), ErrorCode::kUnsupported, "decoder.type 'WordPiece'");
  j = base();
  j["post_processor"] = {{"type", "Mystery"}};
  expect_error(j.dump(), ErrorCode::kUnsupported, "'Mystery'");
  j = base();
  j["model"]["merges"].push_back({"zz", "q"});
  expect_error(j.dump(), ErrorCode::kFormat, "model.merges[5]");
  j = base();
  j["model"]["merges"].push_back("a b c");
  expect_error(j.dump(), ErrorCode::kFormat, "model.merges[5]");
  j = base();
  j["model"]["vocab"]["x"] = "one";
  expect_error(j.dump(), ErrorCode::kFormat, "model.vocab['x']");
  j = base();
  j["model"]["vocab"]["x"] = -5;
  expect_error(j.dump(), ErrorCode::kFormat, "model.vocab['x']");
  j = base();
  j["model"]["vocab"]["x"] = 100000000;  // one huge id: dense id tables of 3 GB (now refused)
  expect_error(j.dump(), ErrorCode::kFormat, "model.vocab['x']");
  j = base();
  j["added_tokens"][0]["id"] = 20000000;
  expect_error(j.dump(), ErrorCode::kFormat, "added_tokens[0]");
  j = base();
  j["model"]["vocab"] = json::object();
  j["model"]["merges"] = json::array();
  j.erase("added_tokens");
  expect_error(j.dump(), ErrorCode::kFormat, "no tokens");
  j = base();
  j["model"]["dropout"] = 0.1;
  expect_error(j.dump(), ErrorCode::kUnsupported, "dropout");
  j = base();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}};
  expect_error(j.dump(), ErrorCode::kFormat, "pre_tokenizer.pattern.Regex");
  j = base();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Sideways"}};
  expect_error(j.dump(), ErrorCode::kFormat, "Sideways");
  j = base();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "ab"}};
  expect_error(j.dump(), ErrorCode::kFormat, "single character");
  j = base();
  j["added_tokens"][0]["id"] = "seven";
  expect_error(j.dump(), ErrorCode::kFormat, "added_tokens[0].id");
  j = base();
  j["added_tokens"][0].erase("content");
  expect_error(j.dump(), ErrorCode::kFormat, "added_tokens[0]");
  j = base();
  j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<s>"}}}}}}, {"special_tokens", json::object()}};
  expect_error(j.dump(), ErrorCode::kFormat, "'<s>'");
}

TEST(TokenizerBadInput, MissingFileIsNotFound) {
  auto tok = mamba::Tokenizer::from_file("/nonexistent/tokenizer.json");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().code, ErrorCode::kNotFound);
  EXPECT_NE(tok.error().message.find("/nonexistent/tokenizer.json"), std::string::npos);
}

// A directory opens as an ifstream and reads as nothing: it was reported as "invalid JSON".
TEST(TokenizerBadInput, DirectoryIsNamedAsOne) {
  const std::string dir = mamba::test::source_dir() + "/models/mamba2-books-7m-bpe8k";
  auto tok = mamba::Tokenizer::from_file(dir);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(tok.error().message.find(dir + ": is a directory, expected a tokenizer.json file (e.g. " + dir + "/tokenizer.json)"),
            std::string::npos) << tok.error().message;
  auto slash = mamba::Tokenizer::from_file(dir + "/");  // the suggested path has one slash
  ASSERT_FALSE(slash.ok());
  EXPECT_NE(slash.error().message.find("(e.g. " + dir + "/tokenizer.json)"), std::string::npos) << slash.error().message;
  auto null_dev = mamba::Tokenizer::from_file("/dev/null");  // not a regular file (a FIFO would block)
  ASSERT_FALSE(null_dev.ok());
  EXPECT_NE(null_dev.error().message.find("/dev/null: not a regular file"), std::string::npos) << null_dev.error().message;
  auto ok = mamba::Tokenizer::from_file(dir + "/tokenizer.json");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  // token_text's own range error names token_text (it named token_bytes).
  auto bad = ok->token_text(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("token_text: token id -1 is out of range", 0), 0u) << bad.error().message;
  // Result's rvalue operator* moves the value out.
  mamba::Tokenizer moved = *mamba::Tokenizer::from_file(dir + "/tokenizer.json");
  EXPECT_EQ(moved.size(), ok->size());
  // ... by value, so a range-for over *f() iterates a live vector (a reference dangled).
  const auto want = *ok->encode("It was a dark and stormy night");
  std::vector<std::int32_t> got;
  for (std::int32_t id : *ok->encode("It was a dark and stormy night")) got.push_back(id);
  EXPECT_EQ(got, want);
}

TEST(TokenizerBadInput, TruncatedFilesNeverCrash) {
  const std::string full = mamba::test::tiny_metaspace_json();
  for (std::size_t cut = 0; cut < full.size(); cut += 7) {
    auto tok = mamba::Tokenizer::from_json_text(full.substr(0, cut), "cut.json");
    EXPECT_FALSE(tok.ok()) << "cut at " << cut;
  }
  EXPECT_TRUE(mamba::Tokenizer::from_json_text(full).ok());
}

}  // namespace
