// read_tokenizer_chat_template: tokenizer_config.json's chat_template (a string, or HF's list of
// named templates) and the bos_token / eos_token strings a template refers to.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "io/generation_config.h"
#include "io/io_test_util.h"

namespace mamba::io {
namespace {

using test::TempDir;

TEST(TokenizerChatTemplate, StringTemplateAndSpecialTokens) {
  TempDir d;
  d.write("tokenizer_config.json",
          R"({"chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
              "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>", "pad_token": null})");
  auto t = read_tokenizer_chat_template(d.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_TRUE(t->has_value());
  EXPECT_EQ((**t).source, "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}");
  const std::map<std::string, std::string> special = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  EXPECT_EQ((**t).special_tokens, special);
  EXPECT_EQ((**t).path, d.path() + "/tokenizer_config.json");
}

TEST(TokenizerChatTemplate, NamedTemplatesTakeDefault) {
  TempDir d;
  d.write("tokenizer_config.json",
          R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}], "eos_token": null})");
  auto t = read_tokenizer_chat_template(d.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ((**t).source, "D");
  EXPECT_EQ((**t).named_templates, (std::map<std::string, std::string>{{"default", "D"}, {"tool_use", "T"}}));
  EXPECT_TRUE((**t).special_tokens.empty());  // a null eos_token is none
  d.write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"}]})");
  t = read_tokenizer_chat_template(d.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ((**t).source, "");  // no default: none (as transformers without a template name)
  EXPECT_EQ((**t).named_templates, (std::map<std::string, std::string>{{"tool_use", "T"}}));  // mamba-server names them
  d.write("tokenizer_config.json", R"({"chat_template": "S"})");
  t = read_tokenizer_chat_template(d.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_TRUE((**t).named_templates.empty());
}

TEST(TokenizerChatTemplate, AbsentFileOrKey) {
  TempDir d;
  auto t = read_tokenizer_chat_template(d.path());
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->has_value());
  d.write("tokenizer_config.json", R"({"eos_token": "<|endoftext|>"})");
  t = read_tokenizer_chat_template(d.path());
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(t->has_value());
  EXPECT_EQ((**t).source, "");
  EXPECT_EQ((**t).special_tokens.at("eos_token"), "<|endoftext|>");
}

TEST(TokenizerChatTemplate, WrongTypesNameTheFileAndField) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"chat_template": 5})");
  auto t = read_tokenizer_chat_template(d.path());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, d.path() + "/tokenizer_config.json: chat_template: expected a string or a list of named templates, got number");
  d.write("tokenizer_config.json", R"({"chat_template": [{"name": "default"}]})");
  t = read_tokenizer_chat_template(d.path());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("chat_template: a list's entries must be"), std::string::npos) << t.error().message;
  d.write("tokenizer_config.json", R"({"chat_template": "x", "bos_token": 1})");
  t = read_tokenizer_chat_template(d.path());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().message, d.path() + "/tokenizer_config.json: bos_token: expected a string, got 1");
}

}  // namespace
}  // namespace mamba::io
