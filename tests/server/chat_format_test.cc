// ChatFormat: chat `messages` → prompt through a chat template (HF apply_chat_template's context:
// messages, add_generation_prompt, bos_token, eos_token, chat_template_kwargs) or the fixed format,
// and the chat request parsers' use of it (stops, add_special_tokens, add_generation_prompt).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat_format.h"
#include "server/openai_request.h"

namespace mamba::server {
namespace {

using nlohmann::json;

/// ChatML, with the tokenizer's bos_token first and a kwargs variable; tool turns refused as a
/// Llama-2-style template refuses a broken alternation.
constexpr const char* kChatMl =
    "{{ bos_token }}{% for m in messages %}"
    "{% if m.role == 'tool' %}{{ raise_exception('Only user, assistant and system roles are supported!') }}{% endif %}"
    "{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    "{% if enable_thinking is defined and not enable_thinking %}<think></think>{% endif %}";

ChatFormat chatml() {
  auto f = ChatFormat::from_template(kChatMl, "test/tokenizer_config.json", {{"bos_token", "<s>"}, {"eos_token", "</s>"}});
  if (!f.ok()) ADD_FAILURE() << f.error().message;
  return std::move(f).value();
}

TEST(ChatFormat, TemplateRendersMessagesAsApplyChatTemplate) {
  const ChatFormat f = chatml();
  EXPECT_TRUE(f.has_template());
  EXPECT_EQ(f.origin(), "test/tokenizer_config.json");
  std::string out;
  // "developer" (OpenAI's newer name for system) reaches the template as "system".
  ASSERT_FALSE(f.render({{"developer", "Be brief."}, {"user", "Hi"}}, {}, out));
  EXPECT_EQ(out, "<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  ASSERT_FALSE(f.render({{"user", "Hi"}, {"assistant", "Hello."}}, {.add_generation_prompt = false}, out));
  EXPECT_EQ(out, "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n");
  EXPECT_TRUE(f.stop_strings().empty());
  EXPECT_FALSE(f.default_add_special_tokens());
}

TEST(ChatFormat, KwargsAreTheTemplatesVariables) {
  const ChatFormat f = chatml();
  std::string out;
  const json kw = {{"enable_thinking", false}, {"bos_token", ""}};  // a request's kwargs win over the server's values
  ASSERT_FALSE(f.render({{"user", "Hi"}}, {.kwargs = &kw}, out));
  EXPECT_EQ(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think></think>");
  const json not_object = json::array({1});
  auto e = f.render({{"user", "Hi"}}, {.kwargs = &not_object}, out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "`chat_template_kwargs` must be an object, got array");
  const json messages = {{"messages", json::array()}};
  e = f.render({{"user", "Hi"}}, {.kwargs = &messages}, out);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("cannot set `messages`"), std::string::npos) << e->message;
}

TEST(ChatFormat, RaiseExceptionIsTheClientsErrorWithTheTemplatesMessage) {
  const ChatFormat f = chatml();
  std::string out;
  auto e = f.render({{"user", "Hi"}, {"tool", "42"}}, {}, out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 422);  // a 400 under /v1
  EXPECT_EQ(e->message, "chat template: Only user, assistant and system roles are supported!");
}

TEST(ChatFormat, TemplatesThatDoNotParseOrRenderAreRefusedNamingTheirOrigin) {
  auto bad = ChatFormat::from_template("{% for m in messages %}", "dir/tokenizer_config.json", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("dir/tokenizer_config.json: chat template: line 1", 0), 0u) << bad.error().message;
  // Parses, but its filter is unknown: found by the start-up render, not on every request.
  auto unknown = ChatFormat::from_template("{{ messages[0].content | nosuchfilter }}", "x.jinja", {});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().code, ErrorCode::kUnsupported);
  EXPECT_EQ(unknown.error().message.rfind("x.jinja: chat template: line 1: ", 0), 0u) << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("nosuchfilter"), std::string::npos) << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("(rendering one user message)"), std::string::npos) << unknown.error().message;
  // A template that requires a system message refuses the start-up render by its own
  // raise_exception: accepted, and its requests get its message.
  auto strict = ChatFormat::from_template(
      "{% if messages[0].role != 'system' %}{{ raise_exception('a system message is required') }}{% endif %}"
      "{% for m in messages %}{{ m.content }}{% endfor %}", "y.jinja", {});
  ASSERT_TRUE(strict.ok()) << strict.error().message;
  std::string out;
  auto e = strict->render({{"user", "Hi"}}, {}, out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "chat template: a system message is required");
  ASSERT_FALSE(strict->render({{"system", "S"}, {"user", "Hi"}}, {}, out));
  EXPECT_EQ(out, "SHi");
}

TEST(ChatFormat, VariablesAsApplyChatTemplatePassesThem) {
  // tools and documents are none (not undefined), the tokenizer's special tokens are set, others undefined.
  auto f = ChatFormat::from_template("{{ tools is none }} {{ documents is none }} {{ pad_token }} {{ unk_token is defined }}"
                                     "{% if tools is not none %}{{ tools | tojson }}{% endif %}",
                                     "z.jinja", {{"pad_token", "<pad>"}});
  ASSERT_TRUE(f.ok()) << f.error().message;
  std::string out;
  ASSERT_FALSE(f->render({{"user", "Hi"}}, {}, out));
  EXPECT_EQ(out, "True True <pad> False");
  const json kw = {{"tools", json::array({{{"type", "function"}}})}};
  ASSERT_FALSE(f->render({{"user", "Hi"}}, {.kwargs = &kw}, out));
  EXPECT_EQ(out, "False True <pad> False[{\"type\": \"function\"}]");
  // A run-time error on a request is the engine's message, prefixed once.
  auto div = ChatFormat::from_template("{% if messages | length > 1 %}{{ 1 // 0 }}{% endif %}", "d.jinja", {});
  ASSERT_TRUE(div.ok()) << div.error().message;
  auto e = div->render({{"user", "a"}, {"user", "b"}}, {}, out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message.rfind("chat template: line 1: ", 0), 0u) << e->message;
}

TEST(ChatFormat, ContinueFinalMessageEndsInsideTheAssistantsTurn) {
  const ChatFormat f = chatml();
  std::string out;
  ASSERT_FALSE(f.render({{"user", "Hi"}, {"assistant", "Once upon "}}, {.add_generation_prompt = false, .continue_final_message = true}, out));
  EXPECT_EQ(out, "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon");
  const ChatFormat fixed;
  ASSERT_FALSE(fixed.render({{"user", "Hi"}, {"assistant", "Once"}}, {.add_generation_prompt = false, .continue_final_message = true}, out));
  EXPECT_EQ(out, "User: Hi\n\nAssistant: Once");
  auto e = f.render({{"user", "Hi"}, {"assistant", "x"}}, {.continue_final_message = true}, out);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("cannot both be true"), std::string::npos) << e->message;
  e = f.render({{"user", "Hi"}}, {.add_generation_prompt = false, .continue_final_message = true}, out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "`continue_final_message` needs the final message to be an assistant's");
  e = f.render({{"user", "Hi"}, {"assistant", "  "}}, {.add_generation_prompt = false, .continue_final_message = true}, out);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("not in the rendered prompt"), std::string::npos) << e->message;
}

TEST(ChatFormat, FixedFormatWithoutATemplate) {
  const ChatFormat f;
  EXPECT_FALSE(f.has_template());
  std::string out;
  ASSERT_FALSE(f.render({{"developer", "d"}, {"user", "u"}}, {}, out));
  EXPECT_EQ(out, "System: d\n\nUser: u\n\nAssistant:");
  ASSERT_FALSE(f.render({{"user", "u"}}, {.add_generation_prompt = false}, out));
  EXPECT_EQ(out, "User: u\n\n");
  EXPECT_EQ(f.stop_strings(), std::vector<std::string>{"\nUser:"});
  EXPECT_TRUE(f.default_add_special_tokens());
}

TEST(ChatFormat, ChatRequestsThroughATemplate) {
  const ChatFormat f = chatml();
  OpenAiRequest r;
  ASSERT_FALSE(parse_chat_request(json::parse(R"({"messages":[{"role":"user","content":"Hi"}],"stop":["END"]})"), RequestLimits{}, r, &f));
  EXPECT_EQ(r.prompt, "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(r.opts.stop, std::vector<std::string>{"END"});  // no "\nUser:"
  EXPECT_FALSE(r.add_special_tokens);                        // vLLM's chat default: the template writes the BOS
  OpenAiRequest given;
  ASSERT_FALSE(parse_chat_request(json::parse(R"({"messages":[{"role":"user","content":"Hi"}],"add_special_tokens":true,
                                                  "add_generation_prompt":false,"chat_template_kwargs":{"enable_thinking":false}})"),
                                  RequestLimits{}, given, &f));
  EXPECT_TRUE(given.add_special_tokens);
  EXPECT_EQ(given.prompt, "<s><|im_start|>user\nHi<|im_end|>\n<think></think>");
  EXPECT_TRUE(unread_openai_fields(json::parse(R"({"add_generation_prompt":true,"chat_template_kwargs":{},"continue_final_message":false})"), true).empty());
  OpenAiRequest refused;
  auto e = parse_chat_request(json::parse(R"({"messages":[{"role":"tool","content":"x"}]})"), RequestLimits{}, refused, &f);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "chat template: Only user, assistant and system roles are supported!");
  VllmTokenizeRequest t;
  ASSERT_FALSE(parse_vllm_tokenize_request(json::parse(R"({"messages":[{"role":"user","content":"Hi"}]})"), t, &f));
  EXPECT_EQ(t.text, "<s><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(t.add_special_tokens);
  VllmTokenizeRequest fixed;
  ASSERT_FALSE(parse_vllm_tokenize_request(json::parse(R"({"messages":[{"role":"user","content":"Hi"}]})"), fixed));
  EXPECT_EQ(fixed.text, "User: Hi\n\nAssistant:");
  EXPECT_TRUE(fixed.add_special_tokens);
}

TEST(ChatFormat, WhatThePromptWouldLackIsRefusedByName) {
  const ChatFormat f = chatml();
  const char* const bodies[][2] = {
      {R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f"}}]})", "`tools`"},
      {R"({"messages":[{"role":"user","content":"Hi"}],"documents":[{"text":"d"}]})", "`documents`"},
      {R"({"messages":[{"role":"user","content":"Hi"}],"chat_template":"{{ 1 }}"})", "`chat_template`"},
      {R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"x","tool_calls":[{"id":"1","type":"function"}]}]})",
       "`messages[1].tool_calls`"},
  };
  for (const auto& [body, field] : bodies) {
    OpenAiRequest r;
    auto e = parse_chat_request(json::parse(body), RequestLimits{}, r, &f);
    ASSERT_TRUE(e) << body;
    EXPECT_NE(e->message.find(field), std::string::npos) << e->message;
    VllmTokenizeRequest t;  // /tokenize answers what the chat route would run: refused the same way
    auto te = parse_vllm_tokenize_request(json::parse(body), t, &f);
    ASSERT_TRUE(te) << body;
    EXPECT_EQ(te->message, e->message);
  }
  OpenAiRequest empty_tools;  // an empty list offers nothing (LangChain sends one)
  EXPECT_FALSE(parse_chat_request(json::parse(R"({"messages":[{"role":"user","content":"Hi"}],"tools":[]})"), RequestLimits{}, empty_tools, &f));
}

TEST(ChatFormat, InvalidUtf8FromTheTemplateIsItsFault) {
  auto bad = ChatFormat::from_template("{{ '\xff' }}", "b.jinja", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "b.jinja: chat template: the rendered prompt is not valid UTF-8 (byte 0xFF at offset 0) (rendering one user message)");
  auto later = ChatFormat::from_template("{% if messages | length > 1 %}\xfe{% endif %}ok", "c.jinja", {});
  ASSERT_TRUE(later.ok()) << later.error().message;
  std::string out;
  auto e = later->render({{"user", "a"}, {"user", "b"}}, {}, out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "chat template: the rendered prompt is not valid UTF-8 (byte 0xFE at offset 0)");
}

}  // namespace
}  // namespace mamba::server
