// JsonArrayWriter / dump_with_members: the text they build parses back to the DOM the answer would
// have been (members in the object's order, a raw member in its placeholder's place). shown_text:
// a client's text quoted in an error message, cut at a character boundary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/json_fields.h"

namespace mamba::server {
namespace {

using ordered_json = nlohmann::ordered_json;

TEST(JsonText, ArrayWriterAndMembersSpliceInPlace) {
  JsonArrayWriter w;
  EXPECT_EQ(w.take(), "[]");
  w.push(ordered_json{{"t", "\xC3\xA9\"\n"}, {"lp", -1.5}});
  w.push_raw("null");
  w.push(ordered_json(7));
  const std::string arr = w.take();
  EXPECT_EQ(arr, R"([{"t":"é\"\n","lp":-1.5},null,7])");
  EXPECT_EQ(w.take(), "[]");  // left empty

  const ordered_json obj{{"index", 0}, {"logprobs", nullptr}, {"finish_reason", "stop"}};
  const std::string text = dump_with_member(obj, "logprobs", arr);
  EXPECT_EQ(text, R"({"index":0,"logprobs":[{"t":"é\"\n","lp":-1.5},null,7],"finish_reason":"stop"})");
  ordered_json want = obj;
  want["logprobs"] = ordered_json::parse(arr);
  EXPECT_EQ(ordered_json::parse(text), want);
  // A member not in the object comes last; several at once; an empty object.
  EXPECT_EQ(dump_with_members(ordered_json{{"a", 1}}, {{"z", "[]"}, {"a", "\"x\""}}), R"({"a":"x","z":[]})");
  EXPECT_EQ(dump_with_member(ordered_json::object(), "k\"ey", "{}"), R"({"k\"ey":{}})");
  // The two texts around a member (the value not copied), a string value holding \x01 included.
  const ordered_json with_ctrl{{"a", "x\x01y"}, {"b", nullptr}, {"c", 1}};
  const auto [before, after] = dump_around_member(with_ctrl, "b");
  EXPECT_EQ(before + "[1]" + after, dump_with_member(with_ctrl, "b", "[1]"));
  EXPECT_EQ(before, R"({"a":"x\u0001y","b":)");
  EXPECT_EQ(after, R"(,"c":1})");
  const auto [b2, a2] = dump_around_member(ordered_json{{"a", 1}}, "z");
  EXPECT_EQ(b2 + "2" + a2, R"({"a":1,"z":2})");
  // A prefix: the array follows it; left empty (with the prefix) after take().
  JsonArrayWriter p(R"({"content":)");
  EXPECT_EQ(p.take(), R"({"content":[])");
  p.push(ordered_json(1));
  p.push(ordered_json(2));
  EXPECT_EQ(p.take(), R"({"content":[1,2])");
  EXPECT_EQ(p.take(), R"({"content":[])");
}

TEST(JsonText, ShownTextCutsLongTextAtACharacterBoundary) {
  EXPECT_EQ(shown_text("", 4), "");
  EXPECT_EQ(shown_text("abcd", 4), "abcd");
  EXPECT_EQ(shown_text("abcde", 4), "abcd… (5 bytes)");
  // "aé€" is 1 + 2 + 3 bytes: a cut inside é or € goes back to the character's first byte.
  const std::string s = "a\xC3\xA9\xE2\x82\xAC";
  EXPECT_EQ(shown_text(s, 2), "a… (6 bytes)");
  EXPECT_EQ(shown_text(s, 3), "a\xC3\xA9… (6 bytes)");
  EXPECT_EQ(shown_text(s, 4), "a\xC3\xA9… (6 bytes)");
  EXPECT_EQ(shown_text(s, 5), "a\xC3\xA9… (6 bytes)");
  EXPECT_EQ(shown_text(s, 6), s);
  // The error body stays valid UTF-8 JSON whatever the cut.
  const ApiError e{422, "validation", "key \"" + shown_text(s + s, 8) + "\""};
  EXPECT_EQ(nlohmann::json::parse(e.tgi_body())["error"], "key \"a\xC3\xA9\xE2\x82\xAC" "a… (12 bytes)\"");
  EXPECT_EQ(nlohmann::json::parse(e.openai_body())["error"]["message"], "key \"a\xC3\xA9\xE2\x82\xAC" "a… (12 bytes)\"");
}

TEST(ApiErrorShape, TgiOutsideV1AndOpenAiUnderIt) {
  const ApiError e{422, "validation", "`max_tokens` must be >= 1"};
  EXPECT_EQ(e.tgi_body(), R"({"error":"`max_tokens` must be >= 1","error_type":"validation"})");
  EXPECT_EQ(e.openai_body(),
            R"({"error":{"code":"validation","message":"`max_tokens` must be >= 1","param":"max_tokens","type":"invalid_request_error"}})");
  // param: the field a message starts with, else null; code: openai_code when set.
  EXPECT_EQ(ApiError(422, "validation", "the prompt is empty", "context_length_exceeded").openai_body(),
            R"({"error":{"code":"context_length_exceeded","message":"the prompt is empty","param":null,"type":"invalid_request_error"}})");
  EXPECT_EQ(e.status_for("/v1/completions"), 400);
  EXPECT_EQ(e.status_for("/generate"), 422);
  EXPECT_EQ(ApiError(429, "overloaded", "m").status_for("/v1/completions"), 429);
  EXPECT_EQ(e.body_for("/generate"), e.tgi_body());
  EXPECT_EQ(e.body_for("/"), e.tgi_body());
  EXPECT_EQ(e.body_for("/health"), e.tgi_body());
  EXPECT_EQ(e.body_for("/v1x"), e.tgi_body());
  EXPECT_EQ(e.body_for(""), e.tgi_body());  // a request refused before its path was read
  EXPECT_EQ(e.body_for("/v1"), e.openai_body());
  EXPECT_EQ(e.body_for("/v1/chat/completions"), e.openai_body());
  EXPECT_EQ(e.body_for("/v1/no/such/route"), e.openai_body());
  // An OpenAI client's paths without their /v1 (a base URL lacking it): its 404 in OpenAI's shape.
  EXPECT_EQ(e.body_for("/chat/completions"), e.openai_body());
  EXPECT_EQ(e.body_for("/models/x"), e.openai_body());
  EXPECT_EQ(e.body_for("/completionsx"), e.tgi_body());
}

TEST(ApiErrorShape, OpenAiTypesByStatus) {
  const std::pair<int, const char*> cases[] = {
      {400, "invalid_request_error"}, {405, "invalid_request_error"}, {411, "invalid_request_error"},
      {413, "invalid_request_error"}, {415, "invalid_request_error"}, {422, "invalid_request_error"},
      {431, "invalid_request_error"}, {401, "authentication_error"},  {403, "permission_error"},
      {404, "not_found_error"},       {429, "rate_limit_error"},      {424, "server_error"},
      {500, "server_error"},          {501, "not_supported_error"},   {503, "unavailable_error"},
  };
  for (const auto& [status, type] : cases) {
    const ApiError e{status, "x", "m"};
    EXPECT_STREQ(e.openai_type(), type) << status;
  }
}

}  // namespace
}  // namespace mamba::server
