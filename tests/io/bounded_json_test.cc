// parse_json_bounded (core/bounded_json.h) and the files read through it: nesting past the bound is
// an error naming the bound (a deeper value crashed `inspect` and the server when printed), syntax
// errors keep nlohmann's position without its tag, repeated top-level keys are noted.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>

#include "core/bounded_json.h"
#include "mamba/checkpoint.h"
#include "mamba/config.h"
#include "io/io_test_util.h"

namespace mamba {
namespace {

std::string arrays(int levels) { return std::string(static_cast<std::size_t>(levels), '[') + std::string(static_cast<std::size_t>(levels), ']'); }

TEST(BoundedJson, NestingUpToTheBoundParsesPastItIsRefused) {
  nlohmann::json j;
  EXPECT_FALSE(parse_json_bounded(arrays(kMaxJsonDepth), j));
  EXPECT_EQ(j.dump().size(), 2u * kMaxJsonDepth);
  for (int levels : {kMaxJsonDepth + 1, 1000000}) {
    auto fault = parse_json_bounded(arrays(levels), j);
    ASSERT_TRUE(fault) << levels;
    EXPECT_TRUE(fault->too_deep);
    EXPECT_EQ(fault->message, fmt::format("arrays and objects nested more than {} levels deep", kMaxJsonDepth));
  }
  // Objects count too, and the bound is a parameter: {"a":{"a":{}}} is 3 levels.
  EXPECT_FALSE(parse_json_bounded(R"({"a":{"a":{}}})", j, 3));
  EXPECT_TRUE(parse_json_bounded(R"({"a":{"a":{"a":[]}}})", j, 3));
  // Wide is fine: the bound is on depth only.
  std::string wide = "[";
  for (int i = 0; i < 100000; ++i) wide += i ? ",[[1]]" : "[[1]]";
  EXPECT_FALSE(parse_json_bounded(wide + "]", j));
  EXPECT_EQ(j.size(), 100000u);
}

TEST(BoundedJson, SyntaxErrorsKeepThePositionWithoutTheLibrarysTag) {
  nlohmann::json j;
  auto fault = parse_json_bounded(R"({"a": 1,})", j);
  ASSERT_TRUE(fault);
  EXPECT_FALSE(fault->too_deep);
  EXPECT_EQ(fault->message.rfind("parse error at line 1, column 9:", 0), 0u) << fault->message;
  EXPECT_TRUE(parse_json_bounded("{} x", j));                       // trailing bytes
  EXPECT_TRUE(parse_json_bounded("\"\xff\"", j));                   // invalid UTF-8
  EXPECT_TRUE(parse_json_bounded("", j));
  EXPECT_FALSE(parse_json_bounded(" {\"k\": [1, 2.5, \"s\", null, true]} ", j));
  EXPECT_EQ(j["k"][1], 2.5);
}

TEST(BoundedJson, ANulByteAnywhereIsASyntaxError) {
  // nlohmann's lexer ends the input at a NUL: "{}\0junk" parsed as {} before the check.
  using namespace std::string_literals;
  nlohmann::json j;
  auto fault = parse_json_bounded("{\"a\": 1}\0junk"s, j);
  ASSERT_TRUE(fault);
  EXPECT_FALSE(fault->too_deep);
  EXPECT_EQ(fault->message, "parse error at line 1, column 9: a NUL byte (byte 9 of 13), which JSON text cannot contain");
  fault = parse_json_bounded("{\n \"a\": \"x\0y\"}"s, j);  // inside a string (unescaped), on line 2
  ASSERT_TRUE(fault);
  EXPECT_EQ(fault->message.rfind("parse error at line 2, column 9: a NUL byte", 0), 0u) << fault->message;
  EXPECT_TRUE(parse_json_bounded("\0"s, j));
  EXPECT_TRUE(parse_json_bounded("{}\0"s, j));
  EXPECT_FALSE(parse_json_bounded(R"({"a": "x\u0000y"})", j));  // the escaped form is JSON
  EXPECT_EQ(j["a"].get<std::string>(), "x\0y"s);
  // config.json with bytes after a NUL loaded (`mamba-cli inspect` exited 0).
  auto c = ModelConfig::from_json_text("{\"d_model\": 8, \"n_layer\": 1, \"vocab_size\": 8}\0garbage"s, "dir/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kFormat);
  EXPECT_EQ(c.error().message.rfind("dir/config.json: invalid JSON: parse error at line 1, column 46: a NUL byte", 0), 0u)
      << c.error().message;
}

TEST(BoundedJson, RepeatedTopLevelKeyIsNoted) {
  nlohmann::json j;
  std::optional<std::string> repeated;
  EXPECT_FALSE(parse_json_bounded(R"({"a": {"x": 1, "x": 2}, "b": 1, "a": 3})", j, kMaxJsonDepth, &repeated));
  EXPECT_EQ(repeated, "a");  // the nested repeat is not the top level's
  EXPECT_FALSE(parse_json_bounded(R"({"a": 1, "b": 2})", j, kMaxJsonDepth, &repeated));
  EXPECT_FALSE(repeated);
}

// The files read through it: a config.json, tokenizer.json or safetensors header nested past the
// bound is an error naming the file, not a crash.
TEST(BoundedJson, DeepConfigAndSafetensorsHeaderAreErrors) {
  auto c = ModelConfig::from_json_text(R"({"d_model": 8, "n_layer": 1, "vocab_size": 8, "ssm_cfg": )" + arrays(200000) + "}", "dir/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code, ErrorCode::kFormat);
  EXPECT_EQ(c.error().message, fmt::format("dir/config.json: invalid JSON: arrays and objects nested more than {} levels deep", kMaxJsonDepth));

  test::TempDir d;
  d.write("config.json", R"({"d_model": 8, "n_layer": 1, "vocab_size": 8})");
  const std::string header = R"({"__metadata__": {"format": "pt"}, "x": )" + arrays(200000) + "}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  d.write("model.safetensors", file + header);
  auto ck = Checkpoint::open(d.path());
  ASSERT_FALSE(ck.ok());
  EXPECT_NE(ck.error().message.find("model.safetensors"), std::string::npos) << ck.error().message;
  EXPECT_NE(ck.error().message.find("is not a JSON object"), std::string::npos) << ck.error().message;
}

}  // namespace
}  // namespace mamba
