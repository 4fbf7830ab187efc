// ChatTemplate (src/tokenizer/chat_template.h): differential cases rendered by the real jinja2 as
// HF transformers renders chat templates (tests/tokenizer/chat_template_cases.json, written by
// make_chat_template_cases.py), byte for byte; the limits; concurrent renders.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"

namespace mamba::tok {
namespace {

using nlohmann::json;

json load_cases() {
  return json::parse(test::read_file(test::source_dir() + "/tests/tokenizer/chat_template_cases.json"));
}

TEST(ChatTemplate, MatchesJinja2OnEveryCase) {
  json cases = load_cases();
  ASSERT_GT(cases.size(), 100u);
  int checked = 0;
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    auto tpl = ChatTemplate::parse(c.at("template").get<std::string>(), "t");
    Result<std::string> out = tpl.ok() ? tpl->render(c.at("context")) : Result<std::string>(tpl.error());
    if (c.contains("expected")) {
      ASSERT_TRUE(out.ok()) << out.error().message;
      EXPECT_EQ(*out, c.at("expected").get<std::string>());
    } else if (c.contains("error_exact")) {
      ASSERT_FALSE(out.ok()) << "rendered: " << *out;
      EXPECT_EQ(out.error().code, ErrorCode::kInvalidArgument);
      EXPECT_EQ(out.error().message, c.at("error_exact").get<std::string>());
    } else {
      ASSERT_FALSE(out.ok()) << "rendered: " << *out << "\njinja2: " << c.value("jinja2_error", "");
      EXPECT_NE(out.error().message.find(c.at("error_contains").get<std::string>()), std::string::npos)
          << out.error().message << "\njinja2: " << c.value("jinja2_error", "");
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(cases.size()));
}

TEST(ChatTemplate, SyntaxErrorsNameTheLineAndColumn) {
  auto t = ChatTemplate::parse("line1\n{% if %}\n{% endif %}", "tpl");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::kFormat);
  EXPECT_EQ(t.error().message.rfind("tpl: line 2, column ", 0), 0u) << t.error().message;

  auto s = ChatTemplate::parse("{{ 'abc }}");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kFormat);
  EXPECT_NE(s.error().message.find("chat_template: line 1, column 4"), std::string::npos) << s.error().message;

  for (const char* bad : {"{{ }}", "{% for %}", "{{ (1 }}", "{{ 1 ]}}", "{% endif %}", "{# open", "{% raw %}x",
                          "{{ a b }}", "{% macro m( %}{% endmacro %}", "{% break %}"}) {
    auto r = ChatTemplate::parse(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.error().code, ErrorCode::kFormat) << bad << ": " << r.error().message;
    }
  }
}

TEST(ChatTemplate, UnsupportedConstructsSayWhat) {
  for (const char* src : {"{% extends 'x' %}", "{% include 'x' %}", "{% call m() %}x{% endcall %}", "{% filter upper %}x{% endfilter %}",
                          "{% for x in xs recursive %}{% endfor %}", "{{ x|truncate(3) }}", "{{ f(*args) }}", "{% with a = 1 %}{% endwith %}"}) {
    auto r = ChatTemplate::parse(src, "t");
    ASSERT_FALSE(r.ok()) << src;
    EXPECT_EQ(r.error().code, ErrorCode::kUnsupported) << src << ": " << r.error().message;
    EXPECT_NE(r.error().message.find("t: line 1: "), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("is not supported"), std::string::npos) << r.error().message;
  }
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  auto t = ChatTemplate::parse("a\nb\n{{ 'x' + 1 }}", "tpl");
  ASSERT_TRUE(t.ok());
  auto r = t->render(json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message.rfind("tpl: line 3: ", 0), 0u) << r.error().message;
  // raise_exception's text is passed on as it is
  auto raise = ChatTemplate::parse("\n\n{{ raise_exception('Only user and assistant roles!') }}");
  ASSERT_TRUE(raise.ok());
  auto e = raise->render(json::object());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(e.error().message, "Only user and assistant roles!");
  // a non-object context
  EXPECT_FALSE(raise->render(json::array()).ok());
}

TEST(ChatTemplate, StepLimitStopsLongLoopsQuickly) {
  auto t = ChatTemplate::parse("{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}");
  ASSERT_TRUE(t.ok());
  auto start = std::chrono::steady_clock::now();
  auto r = t->render(json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("max_steps"), std::string::npos) << r.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // jinja2's sandbox refuses a range past 100000 at once
  auto big = ChatTemplate::parse("{% for i in range(10**9) %}{{ i }}{% endfor %}");
  ASSERT_TRUE(big.ok());
  auto b = big->render(json::object());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("Range too big"), std::string::npos);
  // a small budget
  ChatTemplateLimits small;
  small.max_steps = 1000;
  auto loop = ChatTemplate::parse("{% for i in range(5000) %}{{ i }}{% endfor %}");
  ASSERT_TRUE(loop.ok());
  EXPECT_FALSE(loop->render(json::object(), small).ok());
  EXPECT_TRUE(loop->render(json::object()).ok());
}

TEST(ChatTemplate, OutputLimit) {
  ChatTemplateLimits limits;
  limits.max_output_bytes = 1000;
  auto t = ChatTemplate::parse("{% for i in range(2000) %}x{% endfor %}");
  ASSERT_TRUE(t.ok());
  auto r = t->render(json::object(), limits);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("max_output_bytes"), std::string::npos) << r.error().message;
  // strings that double without being output
  auto grow = ChatTemplate::parse("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}");
  ASSERT_TRUE(grow.ok());
  EXPECT_FALSE(grow->render(json::object(), limits).ok());
  auto mul = ChatTemplate::parse("{{ 'x' * 1000000000000 }}{{ [1] * 1000000000000 }}");
  ASSERT_TRUE(mul.ok());
  EXPECT_FALSE(mul->render(json::object(), limits).ok());
}

TEST(ChatTemplate, ValuesBuiltDeepOrSharedAreBounded) {
  // Found by a break-it pass: printing a namespace that holds itself, or a list nested 100000
  // deep, recursed until the stack overflowed (the server died with SIGSEGV); a list shared with
  // itself 40 times over (2^40 leaves) made ==, str and tojson run for ever.
  const char* const deep[] = {
      "{% set ns = namespace() %}{% set ns.a = ns %}{{ ns }}",
      "{% set ns = namespace(s=[1]) %}{% for i in range(100000) %}{% set ns.s = [ns.s] %}{% endfor %}{{ ns.s }}",
      "{% set ns = namespace(s=[1]) %}{% for i in range(100000) %}{% set ns.s = [ns.s] %}{% endfor %}{{ ns.s == ns.s }}",
      "{% set ns = namespace(s={}) %}{% for i in range(100000) %}{% set ns.s = {'k': ns.s} %}{% endfor %}{{ ns.s | string }}",
      "{% set ns = namespace(s=[1]) %}{% for i in range(100000) %}{% set ns.s = [ns.s] %}{% endfor %}{{ ns.s | tojson }}",
  };
  for (const char* src : deep) {
    auto t = ChatTemplate::parse(src);
    ASSERT_TRUE(t.ok()) << src;
    auto r = t->render(json::object());
    ASSERT_FALSE(r.ok()) << src;
    EXPECT_NE(r.error().message.find("nested more than 512 levels"), std::string::npos) << r.error().message;
  }
  const char* const shared[] = {"{{ ns.s == ns.s }}", "{{ ns.s }}", "{{ ns.s | tojson | length }}", "{{ ns.s < ns.s }}"};
  for (const char* tail : shared) {
    const std::string src = std::string("{% set ns = namespace(s=[1]) %}{% for i in range(40) %}{% set ns.s = [ns.s, ns.s] %}{% endfor %}") + tail;
    auto t = ChatTemplate::parse(src);
    ASSERT_TRUE(t.ok()) << src;
    const auto start = std::chrono::steady_clock::now();
    auto r = t->render(json::object());
    ASSERT_FALSE(r.ok()) << src;
    EXPECT_NE(r.error().message.find("max_steps"), std::string::npos) << r.error().message;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  }
  // A namespace holding itself is freed with its render (a shared_ptr cycle leaked 1 MB a
  // request; LeakSanitizer checks this under the ASan build).
  auto cycle = ChatTemplate::parse("{% set ns = namespace(big='x' * 1000) %}{% set ns.me = ns %}{% set ns.l = [ns] %}ok");
  ASSERT_TRUE(cycle.ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cycle->render(json::object()).value(), "ok");
  // strftime_now's longer results (its buffer grows).
  auto time = ChatTemplate::parse("{{ strftime_now('%Y' * 100) | length }}");
  ASSERT_TRUE(time.ok());
  EXPECT_EQ(time->render(json::object()).value(), "400");
}

TEST(ChatTemplate, DeepNestingIsAnErrorNotACrash) {
  const int n = 100000;
  for (const std::string& src : {"{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}",
                                 std::string() + [] {
                                   std::string s;
                                   for (int k = 0; k < n; ++k) s += "{% if true %}";
                                   for (int k = 0; k < n; ++k) s += "{% endif %}";
                                   return s;
                                 }(),
                                 "{{ " + std::string(n, '[') + std::string(n, ']') + " }}",
                                 "{{ " + [] {
                                   std::string s = "1";
                                   for (int k = 0; k < n; ++k) s += " + 1";
                                   return s;
                                 }() + " }}",
                                 "{{ " + [] {
                                   std::string s;
                                   for (int k = 0; k < n; ++k) s += "not -";
                                   return s + "1";
                                 }() + " }}",
                                 "{{ x" + [] {
                                   std::string s;
                                   for (int k = 0; k < n; ++k) s += "|trim";
                                   return s;
                                 }() + " }}"}) {
    auto t = ChatTemplate::parse(src);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.error().code, ErrorCode::kFormat);
  }
  // Macro recursion stops at max_depth.
  auto rec = ChatTemplate::parse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(rec.ok());
  auto r = rec->render(json::object());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("deep"), std::string::npos) << r.error().message;
  ChatTemplateLimits few;
  few.max_depth = 3;
  auto three = ChatTemplate::parse("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}.{% endmacro %}{{ f(2) }}|{{ f(5) }}");
  ASSERT_TRUE(three.ok());
  EXPECT_FALSE(three->render(json::object(), few).ok());
}

TEST(ChatTemplate, ConcurrentRendersAgree) {
  json cases = load_cases();
  const json* chat = nullptr;
  for (const auto& c : cases)
    if (c.at("name") == "llama31_tools/tools") chat = &c;
  ASSERT_NE(chat, nullptr);
  auto t = ChatTemplate::parse(chat->at("template").get<std::string>());
  ASSERT_TRUE(t.ok());
  const std::string expected = chat->at("expected");
  auto ns = ChatTemplate::parse("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(ns.ok());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 200; ++i) {
        auto r = t->render(chat->at("context"));
        if (!r.ok() || *r != expected) ++mismatches[static_cast<std::size_t>(k)];
        auto n = ns->render(chat->at("context"));
        if (!n.ok() || *n != "2") ++mismatches[static_cast<std::size_t>(k)];
      }
    });
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(ChatTemplate, MovedTemplatesStillRender) {
  auto t = ChatTemplate::parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  ChatTemplate a = std::move(t).value();
  ChatTemplate b = std::move(a);
  auto r = b.render(json{{"x", 5}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "5");
}

}  // namespace
}  // namespace mamba::tok
