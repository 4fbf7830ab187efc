// Request parsing and validation: TGI and OpenAI bodies → GenerateOptions, with 4xx errors that
// name the field for every kind of bad input (never an exception, never a 500).
#include <gtest/gtest.h>

#include <cmath>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "mamba/server.h"
#include "core/bounded_json.h"
#include "server/context.h"
#include "server/json_fields.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/slot_pool.h"
#include "server/tgi_request.h"

namespace mamba::server {
namespace {

using nlohmann::json;

std::optional<ApiError> tgi(const std::string& body, TgiRequest& out) {
  json j;
  if (auto e = parse_body_object(body, j)) return e;
  return parse_tgi_request(j, RequestLimits{}, out);
}

std::optional<ApiError> completion(const std::string& body, OpenAiRequest& out) {
  json j;
  if (auto e = parse_body_object(body, j)) return e;
  return parse_completion_request(j, RequestLimits{}, out);
}

std::optional<ApiError> chat(const std::string& body, OpenAiRequest& out) {
  json j;
  if (auto e = parse_body_object(body, j)) return e;
  return parse_chat_request(j, RequestLimits{}, out);
}

TEST(TgiRequest, FullParameters) {
  TgiRequest r;
  auto e = tgi(R"({"inputs":"Hello","parameters":{"max_new_tokens":7,"temperature":0.5,"top_k":3,"top_p":0.9,
      "typical_p":0.95,"min_p":0.05,"repetition_penalty":1.2,"frequency_penalty":0.5,"presence_penalty":-0.25,"seed":42,"do_sample":true,
      "stop":["\n","end"],"details":true,"decoder_input_details":true,"return_full_text":true,"truncate":10,
      "top_n_tokens":2,"best_of":1,"watermark":false}})", r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.inputs, "Hello");
  EXPECT_EQ(r.opts.max_new_tokens, 7);
  EXPECT_FLOAT_EQ(r.opts.sampling.temperature, 0.5f);
  EXPECT_EQ(r.opts.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r.opts.sampling.top_p, 0.9f);
  EXPECT_FLOAT_EQ(r.opts.sampling.typical_p, 0.95f);
  EXPECT_FLOAT_EQ(r.opts.sampling.min_p, 0.05f);
  EXPECT_FLOAT_EQ(r.opts.sampling.repetition_penalty, 1.2f);
  EXPECT_FLOAT_EQ(r.opts.sampling.frequency_penalty, 0.5f);
  EXPECT_TRUE(r.opts.sampling.frequency_penalty_per_length);  // TGI's: count / length
  EXPECT_FLOAT_EQ(r.opts.sampling.presence_penalty, -0.25f);
  EXPECT_TRUE(r.opts.sampling.penalties_count_prompt);  // TGI's frequency penalty runs over all input ids
  EXPECT_TRUE(r.opts.include_stop_text);                // TGI's generated_text ends with the stop sequence
  EXPECT_EQ(r.opts.sampling.seed, 42u);
  EXPECT_TRUE(r.opts.sampling.has_seed);
  EXPECT_TRUE(r.opts.sampling.do_sample);
  EXPECT_EQ(r.opts.stop, (std::vector<std::string>{"\n", "end"}));
  EXPECT_TRUE(r.details);
  EXPECT_TRUE(r.decoder_input_details);
  EXPECT_TRUE(r.opts.prompt_logprobs);
  EXPECT_TRUE(r.return_full_text);
  EXPECT_EQ(r.truncate, 10);
  EXPECT_EQ(r.opts.top_logprobs, 2);
}

// JSON "-0" is a signed integer zero to nlohmann: a seed of 0 (it was refused as "… got 0").
TEST(TgiRequest, MinusZeroSeedIsZero) {
  TgiRequest r;
  auto e = tgi(R"({"inputs":"Hi","parameters":{"seed":-0,"do_sample":true}})", r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.opts.sampling.seed, 0u);
  EXPECT_TRUE(r.opts.sampling.has_seed);
}

TEST(TgiRequest, IntegralFloatSeedIsTakenAsTheOtherIntegerFieldsAre) {
  // 1.0 and 2^63 as JSON floats are integers (as max_new_tokens 2.0 and /v1's seed 1.0 are taken).
  TgiRequest r;
  ASSERT_FALSE(tgi(R"({"inputs":"x","parameters":{"seed":1.0}})", r));
  EXPECT_TRUE(r.opts.sampling.has_seed);
  EXPECT_EQ(r.opts.sampling.seed, 1u);
  TgiRequest big;
  ASSERT_FALSE(tgi(R"({"inputs":"x","parameters":{"seed":9.223372036854775808e18}})", big));
  EXPECT_EQ(big.opts.sampling.seed, 1ull << 63);
}

TEST(TgiRequest, DefaultsAndNulls) {
  TgiRequest r;
  ASSERT_FALSE(tgi(R"({"inputs":"x","parameters":{"temperature":null,"seed":null,"stop":null}})", r));
  EXPECT_EQ(r.opts.max_new_tokens, 100);
  EXPECT_FALSE(r.opts.sampling.do_sample);
  EXPECT_FALSE(r.opts.sampling.has_seed);
  EXPECT_FALSE(r.stream);
  TgiRequest s;
  ASSERT_FALSE(tgi(R"({"inputs":"x","stream":true})", s));
  EXPECT_TRUE(s.stream);
}

TEST(TgiRequest, LargeFiniteFloatsAreTakenAsTheCliTakesThem) {
  // Any finite 32-bit float value (mamba-cli accepts --temp 1e38); beyond FLT_MAX: 422 (BadInputs).
  TgiRequest r;
  ASSERT_FALSE(tgi(R"({"inputs":"x","parameters":{"temperature":2e30,"repetition_penalty":3e38}})", r));
  EXPECT_FLOAT_EQ(r.opts.sampling.temperature, 2e30f);
  EXPECT_FLOAT_EQ(r.opts.sampling.repetition_penalty, 3e38f);
}

struct BadCase {
  const char* body;
  int status;
  const char* mentions;
};

TEST(TgiRequest, BadInputsGive4xxNamingTheField) {
  const BadCase cases[] = {
      {R"({"inputs":"x","parameters":{"max_new_tokens":)", 400, "JSON"},
      {R"([1,2])", 400, "object"},
      {R"()", 400, "empty"},
      {R"({"inputs":""})", 422, "inputs"},
      {R"({"parameters":{}})", 422, "inputs"},
      {R"({"inputs":5})", 422, "inputs"},
      {R"({"inputs":"x","parameters":{"max_new_tokens":-1}})", 422, "max_new_tokens"},
      {R"({"inputs":"x","parameters":{"max_new_tokens":0}})", 422, "max_new_tokens"},
      {R"({"inputs":"x","parameters":{"max_new_tokens":"5"}})", 422, "max_new_tokens"},
      {R"({"inputs":"x","parameters":{"max_new_tokens":1.5}})", 422, "max_new_tokens"},
      {R"({"inputs":"x","parameters":{"max_new_tokens":99999999999999999999999}})", 422, "max_new_tokens"},
      {R"({"inputs":"x","parameters":{"max_new_tokens":1e300}})", 422, "max_new_tokens"},
      {R"({"inputs":"x","parameters":{"temperature":0}})", 422, "temperature"},
      {R"({"inputs":"x","parameters":{"temperature":-1}})", 422, "temperature"},
      {R"({"inputs":"x","parameters":{"temperature":"hot"}})", 422, "temperature"},
      {R"({"inputs":"x","parameters":{"temperature":3.5e38}})", 422, "temperature"},  // beyond FLT_MAX
      {R"({"inputs":"x","parameters":{"top_p":1.0}})", 422, "top_p"},
      {R"({"inputs":"x","parameters":{"top_p":0}})", 422, "top_p"},
      {R"({"inputs":"x","parameters":{"top_k":0}})", 422, "top_k"},
      {R"({"inputs":"x","parameters":{"typical_p":1.5}})", 422, "typical_p"},
      {R"({"inputs":"x","parameters":{"repetition_penalty":0}})", 422, "repetition_penalty"},
      {R"({"inputs":"x","parameters":{"seed":-3}})", 422, "`seed` must be an integer from 0 to 18446744073709551615, got -3"},
      {R"({"inputs":"x","parameters":{"seed":1.5}})", 422, "`seed` must be an integer from 0 to 18446744073709551615, got 1.5"},
      {R"({"inputs":"x","parameters":{"seed":18446744073709551616}})", 422, "to 18446744073709551615, got 1.8446744073709552e+19"},
      {R"({"inputs":"x","parameters":{"seed":"7"}})", 422, "`seed` must be an integer from 0 to 18446744073709551615, got string"},
      {R"({"inputs":"x","parameters":{"seed":-1.0}})", 422, "`seed` must be an integer from 0 to 18446744073709551615, got -1.0"},
      {R"({"inputs":"x","parameters":{"temperature":1e-300}})", 422,
       "`temperature` = 1e-300 is below 7.1e-46 in magnitude, which a 32-bit float rounds to 0"},
      {R"({"inputs":"x","parameters":{"top_p":-1e-50}})", 422, "`top_p` = -1e-50 is below 7.1e-46 in magnitude"},
      {R"({"inputs":"x","parameters":{"stop":["a","b","c","d","e"]}})", 422, "stop"},
      {R"({"inputs":"x","parameters":{"stop":[1]}})", 422, "stop"},
      {R"({"inputs":"x","parameters":{"best_of":2}})", 422, "best_of"},
      {R"({"inputs":"x","parameters":{"top_n_tokens":50}})", 422, "top_n_tokens"},
      {R"({"inputs":"x","parameters":{"watermark":true}})", 422, "watermark"},
      {R"({"inputs":"x","parameters":{"presence_penalty":5}})", 422, "presence_penalty"},
      {R"({"inputs":"x","parameters":{"presence_penalty":"x"}})", 422, "presence_penalty"},
      {R"({"inputs":"x","parameters":{"logit_bias":{"15":100}}})", 422, "logit_bias"},
      {R"({"inputs":"x","parameters":{"n":2}})", 422, "n"},
      {R"({"inputs":"x","parameters":{"details":"yes"}})", 422, "details"},
      {R"({"inputs":"x","parameters":[]})", 422, "parameters"},
      {"{\"inputs\":\"\xff\xfe\"}", 400, "JSON"},
  };
  for (const auto& c : cases) {
    TgiRequest r;
    auto e = tgi(c.body, r);
    ASSERT_TRUE(e.has_value()) << c.body;
    EXPECT_EQ(e->status, c.status) << c.body << " → " << e->message;
    EXPECT_NE(e->message.find(c.mentions), std::string::npos) << c.body << " → " << e->message;
    auto body = json::parse(e->tgi_body());
    EXPECT_TRUE(body["error"].is_string());
    EXPECT_TRUE(body["error_type"].is_string());
  }
}

TEST(OpenAiRequest, SeedAsAnIntegralFloatDownToMinus2To63) {
  // The signed range of OpenAI's seed as JSON floats: −2^63 exactly is taken (it was "must be an
  // integer"); 2^63 (what 9223372036854775807 becomes as a double) is named as out of range.
  OpenAiRequest lo;
  ASSERT_FALSE(completion(R"({"prompt":"a","seed":-9.223372036854775808e18})", lo));
  EXPECT_EQ(lo.opts.sampling.seed, std::uint64_t{1} << 63);
  OpenAiRequest hi;
  const auto e = completion(R"({"prompt":"a","seed":9.223372036854775807e18})", hi);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("`seed` must be between -9223372036854775808 and 9223372036854775807, got 9.223372036854776e+18"),
            std::string::npos)
      << e->message;
}

TEST(OpenAiRequest, NChoicesAreRead) {
  OpenAiRequest one, three, chat3;
  ASSERT_FALSE(completion(R"({"prompt":"a"})", one));
  EXPECT_EQ(one.n, 1);
  ASSERT_FALSE(completion(R"({"prompt":"a","n":3})", three));
  EXPECT_EQ(three.n, 3);
  ASSERT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}],"n":3.0})", chat3));
  EXPECT_EQ(chat3.n, 3);
  OpenAiRequest null_n;
  ASSERT_FALSE(completion(R"({"prompt":"a","n":null})", null_n));
  EXPECT_EQ(null_n.n, 1);
}

// TGI's best_of: up to the server's limit (named), only with sampling and without a seed, as
// TGI's validation (its messages).
TEST(TgiRequest, BestOfNeedsSamplingNoSeedAndTheLimit) {
  RequestLimits limits;
  limits.max_best_of = 4;
  auto parse = [&](const std::string& params, TgiRequest& r) {
    return parse_tgi_request(json::parse(R"({"inputs":"x","parameters":)" + params + "}"), limits, r);
  };
  TgiRequest r;
  ASSERT_FALSE(parse(R"({"best_of":3,"do_sample":true})", r));
  EXPECT_EQ(r.best_of, 3);
  TgiRequest warm;
  ASSERT_FALSE(parse(R"({"best_of":4,"temperature":0.7})", warm));  // a temperature samples
  EXPECT_EQ(warm.best_of, 4);
  TgiRequest plain;
  ASSERT_FALSE(parse(R"({"best_of":null})", plain));
  EXPECT_EQ(plain.best_of, 1);
  const struct {
    std::string params, message;
  } refused[] = {
      {R"({"best_of":2})", "you must use sampling when `best_of` is > 1"},
      {R"({"best_of":2,"do_sample":true,"seed":5})", "`seed` must not be set when `best_of` > 1"},
      {R"({"best_of":5,"do_sample":true})", "`best_of` must be > 0 and <= 4 (--max-best-of), given: 5"},
      {R"({"best_of":1e12,"do_sample":true})", "`best_of` must be > 0 and <= 4 (--max-best-of), given: 1000000000000"},
      {R"({"best_of":0,"do_sample":true})", "`best_of` must be > 0 and <= 4 (--max-best-of), given: 0"},
      {R"({"best_of":-1,"do_sample":true})", "`best_of` must be > 0 and <= 4 (--max-best-of), given: -1"},
      {R"({"best_of":2.5,"do_sample":true})", "`best_of`"},
  };
  for (const auto& c : refused) {
    TgiRequest x;
    const auto e = parse(c.params, x);
    ASSERT_TRUE(e) << c.params;
    EXPECT_EQ(e->status, 422);
    EXPECT_NE(e->message.find(c.message), std::string::npos) << c.params << " → " << e->message;
  }
}

// Any integral `n` above the server's limit (--max-concurrent-requests) names that limit, however
// large: 1e12 and values past int's range were refused with int's range ("between 1 and
// 2147483647") instead. A fraction, 0, a negative or a string keep their own messages.
TEST(OpenAiRequest, NAboveTheLimitNamesTheServersLimit) {
  RequestLimits limits;
  limits.max_choices = 4;
  auto parse = [&](const std::string& body, bool is_chat) {
    json j = json::parse(body);
    OpenAiRequest r;
    return is_chat ? parse_chat_request(j, limits, r) : parse_completion_request(j, limits, r);
  };
  const std::string prompt = R"("prompt":"a")", messages = R"("messages":[{"role":"user","content":"x"}])";
  for (const bool is_chat : {false, true}) {
    const std::string head = "{" + (is_chat ? messages : prompt) + ",\"n\":";
    EXPECT_FALSE(parse(head + "4}", is_chat));
    for (const std::string& n : std::vector<std::string>{"5", "2147483647", "2147483648", "1e12", "18446744073709551615", "18446744073709551616",
                                "1e300", "5.0"}) {
      const auto e = parse(head + n + "}", is_chat);
      ASSERT_TRUE(e) << n;
      EXPECT_EQ(e->status, 422);
      EXPECT_EQ(e->message.find("`n` must be at most 4 (--max-concurrent-requests: each choice is a sequence of its own), got "), 0u)
          << n << ": " << e->message;
    }
    for (const auto& [n, want] : std::vector<std::pair<std::string, std::string>>{
             {"0", "`n` must be between 1 and 2147483647, got 0"},
             {"-3", "`n` must be between 1 and 2147483647, got -3"},
             {"-1e12", "`n` must be between 1 and 2147483647, got -1000000000000"},
             {"1.5", "`n` must be an integer, got 1.5"},
             {"\"3\"", "`n` must be an integer, got string"}}) {
      const auto e = parse(head + n + "}", is_chat);
      ASSERT_TRUE(e) << n;
      EXPECT_EQ(e->message, want) << n;
    }
  }
}

// A client's x-request-id is echoed in a header and written into a log line as sent: only 1 to 128
// bytes of visible ASCII are; anything else (a CR/LF that would end the header or forge a log line,
// a space that would split the log's key=value word, a non-ASCII byte) is ignored for the server's id.
TEST(RequestId, OnlyShortVisibleAsciiIsEchoed) {
  for (const std::string& ok : std::vector<std::string>{"a", "req-123", "0f8fad5b-d9cb-469f-a165-70867728950e", "a/b:c=d;e,f\"g'h~!",
                                                        std::string(128, 'x')})
    EXPECT_TRUE(is_echoable_request_id(ok)) << ok;
  for (const std::string& bad : std::vector<std::string>{std::string(), std::string(129, 'x'), std::string(200, 'x'), std::string("a b"), std::string(" a"),
                                std::string("a\r\nx-forged: 1"), std::string("a\nb"), std::string("a\tb"), std::string("a\x7f"),
                                std::string("caf\xc3\xa9"), std::string("a\0b", 3)})
    EXPECT_FALSE(is_echoable_request_id(bad)) << bad;
}

TEST(RequestId, TheClientsOneOnlyWhenValidAndSingle) {
  auto with = [](std::vector<std::string> values) {
    httplib::Request req;
    for (auto& v : values) req.headers.emplace("X-Request-Id", v);  // header names are case-insensitive
    return req;
  };
  EXPECT_EQ(client_request_id(with({})), "");
  EXPECT_EQ(client_request_id(with({"trace-1"})), "trace-1");
  EXPECT_EQ(client_request_id(with({std::string(129, 'x')})), "");
  EXPECT_EQ(client_request_id(with({"a", "b"})), "");  // several: none is the request's
  httplib::Response mine, ours, none, kept;
  set_request_id_header(with({"trace-1"}), mine, "cmpl-1");
  EXPECT_EQ(mine.get_header_value("x-request-id"), "trace-1");
  set_request_id_header(with({"a b"}), ours, "cmpl-1");
  EXPECT_EQ(ours.get_header_value("x-request-id"), "cmpl-1");
  set_request_id_header(with({}), none);
  EXPECT_FALSE(none.has_header("x-request-id"));
  set_request_id_header(with({}), kept, "cmpl-2");
  set_request_id_header(with({"trace-1"}), kept);  // an answer that has one keeps it (set once)
  EXPECT_EQ(kept.get_header_value_count("x-request-id"), 1u);
  EXPECT_EQ(kept.get_header_value("x-request-id"), "cmpl-2");
  EXPECT_TRUE(is_generation_path("/v1/chat/completions"));
  EXPECT_TRUE(is_generation_path("/"));
  EXPECT_FALSE(is_generation_path("/health"));
  EXPECT_FALSE(is_generation_path("/tokenize"));
}

TEST(OpenAiRequest, CompletionDefaultsSampleAtTemperatureOne) {
  OpenAiRequest r;
  ASSERT_FALSE(completion(R"({"model":"m","prompt":"Once"})", r));
  EXPECT_EQ(r.prompt, "Once");
  EXPECT_EQ(r.opts.max_new_tokens, 16);
  EXPECT_TRUE(r.opts.sampling.do_sample);
  OpenAiRequest g;
  ASSERT_FALSE(completion(R"({"prompt":["Once"],"temperature":0,"max_tokens":3,"logprobs":2,"stop":"\n","seed":7,
                              "stream":true,"stream_options":{"include_usage":true}})", g));
  EXPECT_FALSE(g.opts.sampling.do_sample);
  EXPECT_FALSE(g.opts.sampling.sampling());
  EXPECT_EQ(g.opts.max_new_tokens, 3);
  EXPECT_TRUE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 2);
  EXPECT_EQ(g.opts.top_logprobs, 2);
  EXPECT_EQ(g.opts.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(g.stream);
  EXPECT_TRUE(g.include_usage);
  // temperature 0 stays greedy beside warpers (a common client default is temperature 0 + top_p
  // 0.95: it sampled at temperature 1), on both routes.
  for (const char* body : {R"({"prompt":"a","temperature":0,"top_p":0.95})", R"({"prompt":"a","temperature":0,"top_k":40})",
                           R"({"prompt":"a","temperature":0,"min_p":0.05})"}) {
    OpenAiRequest t0;
    ASSERT_FALSE(completion(body, t0)) << body;
    EXPECT_FALSE(t0.opts.sampling.sampling()) << body;
  }
  OpenAiRequest c0;
  ASSERT_FALSE(chat(R"({"messages":[{"role":"user","content":"hi"}],"temperature":0,"top_p":0.9})", c0));
  EXPECT_FALSE(c0.opts.sampling.sampling());
  // OpenAI's penalties count the sampled tokens only; the stop string is not part of the text;
  // extensions: typical_p, and vLLM's top_k −1 = off.
  OpenAiRequest ext;
  ASSERT_FALSE(completion(R"({"prompt":"a","frequency_penalty":1,"typical_p":0.5,"top_k":-1,"stop":["x"]})", ext));
  EXPECT_FALSE(ext.opts.sampling.penalties_count_prompt);
  EXPECT_FALSE(ext.opts.sampling.frequency_penalty_per_length);  // OpenAI: the plain count
  EXPECT_FALSE(ext.opts.include_stop_text);
  EXPECT_FLOAT_EQ(ext.opts.sampling.typical_p, 0.5f);
  EXPECT_EQ(ext.opts.sampling.top_k, 0);
  OpenAiRequest ids;
  ASSERT_FALSE(completion(R"({"prompt":[5,6,7]})", ids));
  EXPECT_EQ(ids.prompt_ids, (std::vector<std::int32_t>{5, 6, 7}));
  // A batch of one token-id array (lm-eval's tokenized requests), and prompt scoring: echo with
  // max_tokens 0; response_format {"type": "text"} (OpenAI's default) is accepted.
  OpenAiRequest one;
  ASSERT_FALSE(completion(R"({"prompt":[[5,6,7]],"max_tokens":0,"echo":true,"logprobs":1})", one));
  EXPECT_EQ(one.prompt_ids, (std::vector<std::int32_t>{5, 6, 7}));
  EXPECT_EQ(one.opts.max_new_tokens, 0);
  EXPECT_TRUE(one.echo);
  OpenAiRequest text_format;
  EXPECT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"text"}})", text_format));
  // No tool is offered: an empty `tools` / `functions` (LangChain sends `tools: []`) and a tool
  // choice that demands no call ("none", "auto", null) are accepted on both routes.
  for (const char* extra : {R"("tools":[])", R"("functions":[])", R"("tool_choice":"none")", R"("tool_choice":"auto")",
                            R"("tool_choice":null)", R"("tools":[],"tool_choice":"auto")", R"("function_call":"none")"}) {
    OpenAiRequest c, p;
    EXPECT_FALSE(chat(fmt::format(R"({{"messages":[{{"role":"user","content":"x"}}],{}}})", extra), c)) << extra;
    EXPECT_EQ(c.prompt, "User: x\n\nAssistant:") << extra;
    EXPECT_FALSE(completion(fmt::format(R"({{"prompt":"x",{}}})", extra), p)) << extra;
    EXPECT_EQ(p.prompt, "x") << extra;
  }
  // logit_bias: token id strings → biases, on both routes; null and {} set none.
  OpenAiRequest bias;
  ASSERT_FALSE(chat(R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"50256":-100,"7":2.5,"0":100}})", bias));
  std::sort(bias.opts.sampling.logit_bias.begin(), bias.opts.sampling.logit_bias.end());  // order is immaterial
  EXPECT_EQ(bias.opts.sampling.logit_bias, (std::vector<std::pair<std::int32_t, float>>{{0, 100.0f}, {7, 2.5f}, {50256, -100.0f}}));
  // Leading zeros name the same id (vLLM's int(key)); a rejected key is shown cut to 40 bytes.
  OpenAiRequest zeros;
  ASSERT_FALSE(completion(R"({"prompt":"a","logit_bias":{"0000000000287":-1,"0":2}})", zeros));
  std::sort(zeros.opts.sampling.logit_bias.begin(), zeros.opts.sampling.logit_bias.end());
  EXPECT_EQ(zeros.opts.sampling.logit_bias, (std::vector<std::pair<std::int32_t, float>>{{0, 2.0f}, {287, -1.0f}}));
  OpenAiRequest long_key;
  const std::string body = R"({"prompt":"a","logit_bias":{")" + std::string(100000, 'x') + R"(":1}})";
  auto e = completion(body.c_str(), long_key);
  ASSERT_TRUE(e.has_value());
  EXPECT_LT(e->message.size(), 200u) << e->message;
  EXPECT_NE(e->message.find("(100000 bytes)"), std::string::npos) << e->message;
  for (const char* body : {R"({"prompt":"a","logit_bias":null})", R"({"prompt":"a","logit_bias":{}})"}) {
    OpenAiRequest none;
    ASSERT_FALSE(completion(body, none)) << body;
    EXPECT_TRUE(none.opts.sampling.logit_bias.empty()) << body;
  }
}

TEST(OpenAiRequest, BadInputs) {
  const BadCase cases[] = {
      {R"({"prompt":"x","n":0})", 422, "`n` must be"},
      {R"({"prompt":""})", 422, "prompt"},
      {R"({"prompt":["a","b"]})", 422, "prompt"},
      {R"({"prompt":{}})", 422, "prompt"},
      {R"({"prompt":[]})", 422, "`prompt` is an empty array"},
      {R"({"prompt":[[1,2],[3]]})", 422, "batch of prompts"},
      {R"({"prompt":[[]]})", 422, "`prompt` is an empty array of token ids"},
      // A fresh user's: each token id named by its index and value; a string among other values is
      // no batch of prompts.
      {R"({"prompt":["a",1]})", 422, "`prompt` mixes a string with other values: give one string, or an array of token ids"},
      {R"({"prompt":["a","b"]})", 422, "`prompt` must be one string (batches of prompts are not supported)"},
      {R"({"prompt":[true]})", 422, "`prompt[0]` must be a token id (an integer from 0 to 2147483647), got true"},
      {R"({"prompt":[41,-1]})", 422, "`prompt[1]` must be a token id (an integer from 0 to 2147483647), got -1"},
      {R"({"prompt":[41,1.5]})", 422, "`prompt[1]` must be a token id (an integer from 0 to 2147483647), got 1.5"},
      {R"({"prompt":[[41,"x"]]})", 422, "`prompt[0][1]` must be a token id (an integer from 0 to 2147483647), got \"x\""},
      {R"({"prompt":[2147483648]})", 422, "`prompt[0]` must be a token id (an integer from 0 to 2147483647), got 2147483648"},
      {R"({"prompt":"x","max_tokens":0})", 422, "0 only with `echo`"},
      {R"({"prompt":"x","response_format":{"type":"json_object"}})", 422, "response_format"},
      {R"({"prompt":"x","temperature":3})", 422, "temperature"},
      {R"({"prompt":"x","max_tokens":-5})", 422, "max_tokens"},
      // llama.cpp's "no limit" is not a value here: the message says how to get the default.
      {R"({"prompt":"x","max_tokens":-1})", 422, "`max_tokens` must be at least 1, got -1 (there is no value for \"no limit\": leave the field out for the default of 16 tokens"},
      {R"({"prompt":"x","max_tokens":-1.0})", 422, "got -1.0 (there is no value"},
      {R"({"prompt":"x","logprobs":9})", 422, "logprobs"},
      {R"({"prompt":"x","logit_bias":[5,1]})", 422, "`logit_bias` must be an object of token id → bias, got array"},
      {R"({"prompt":"x","logit_bias":{"five":1}})", 422, "`logit_bias` keys must be token ids (non-negative integers as strings), got \"five\""},
      {R"({"prompt":"x","logit_bias":{"-5":1}})", 422, "got \"-5\""},
      {R"({"prompt":"x","logit_bias":{"99999999999":1}})", 422, "`logit_bias` key \"99999999999\" is not a token id of this model: too large"},
      {R"({"prompt":"x","logit_bias":{"2147483648":1}})", 422, "too large"},
      {R"({"prompt":"x","logit_bias":{"5":1e-300}})", 422, "`logit_bias` value of token 5 = 1e-300 is below 7.1e-46"},
      {R"({"prompt":"x","logit_bias":{"5":"1"}})", 422, "`logit_bias` value of token 5 must be a number, got string"},
      {R"({"prompt":"x","logit_bias":{"5":100.5}})", 422, "`logit_bias` value of token 5 must be between -100 and 100, got 100.5"},
      {R"({"prompt":"x","logit_bias":{"5":1,"05":2}})", 422, "`logit_bias` names token id 5 twice"},
      {R"({"prompt":"x","stream":"yes"})", 422, "stream"},
      {R"({"prompt":"x","top_k":-2})", 422, "top_k"},
      {R"({"prompt":"x","typical_p":0})", 422, "typical_p"},
      // OpenAI and vLLM refuse stream options on a request that does not stream.
      {R"({"prompt":"x","stream_options":{"include_usage":true}})", 422, "`stream_options` is only allowed"},
      // vLLM's extensions the engine lacks are refused by name, not ignored.
      {R"({"prompt":"x","stop_token_ids":[200]})", 422, "`stop_token_ids` is not supported"},
      {R"({"prompt":"x","min_tokens":3})", 422, "`min_tokens` is not supported"},
      {R"({"prompt":"x","truncate_prompt_tokens":2})", 422, "`truncate_prompt_tokens` is not supported"},
      {R"({"prompt":"x","ignore_eos":"garbage"})", 422, "`ignore_eos` must be a boolean"},
      {R"({"prompt":"x","include_stop_str_in_output":1})", 422, "`include_stop_str_in_output` must be a boolean"},
      {R"({"prompt":"x","stream":false,"stream_options":{"include_usage":false}})", 422, "`stream_options`"},
      {R"({"prompt":"x","tool_choice":"required"})", 422, "`tool_choice` \"required\" is not supported by this server"},
  };
  for (const auto& c : cases) {
    OpenAiRequest r;
    auto e = completion(c.body, r);
    ASSERT_TRUE(e.has_value()) << c.body;
    EXPECT_EQ(e->status, c.status) << c.body;
    EXPECT_NE(e->message.find(c.mentions), std::string::npos) << e->message;
  }
  // ... and the two it has set the generation's options; their neutral values are accepted.
  OpenAiRequest vllm;
  ASSERT_FALSE(completion(R"({"prompt":"x","ignore_eos":true,"include_stop_str_in_output":true})", vllm).has_value());
  EXPECT_TRUE(vllm.opts.ignore_eos);
  EXPECT_TRUE(vllm.opts.include_stop_text);
  OpenAiRequest neutral;
  ASSERT_FALSE(completion(R"({"prompt":"x","min_tokens":0,"stop_token_ids":[],"truncate_prompt_tokens":null})", neutral).has_value());
  EXPECT_FALSE(neutral.opts.ignore_eos);
  EXPECT_FALSE(neutral.opts.include_stop_text);
  OpenAiRequest empty_options;  // an empty stream_options sets nothing: accepted, as vLLM
  EXPECT_FALSE(completion(R"({"prompt":"x","stream_options":{}})", empty_options).has_value());
  const BadCase chat_cases[] = {
      {R"({"messages":[]})", 422, "messages"},
      {R"({"messages":"hi"})", 422, "`messages` must be an array of {role, content}, got string"},
      {R"({"messages":null})", 422, "`messages` is required"},
      {R"({"messages":[{"role":"wizard","content":"x"}]})", 422, "role"},
      {R"({"messages":[{"content":"x"}]})", 422, "role"},
      {R"({"messages":[{"role":"user","content":5}]})", 422, "content"},
      {R"({"messages":[{"role":"user"}]})", 422, "messages[0].content` is required"},
      {R"({"messages":[{"role":"system","content":"x"},{"role":"user","content":null}]})", 422, "messages[1].content` is required"},
      {R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function"}]}]})", 422,
       "messages[1]` carries `tool_calls` and no content: tool calling is not supported"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":-1})", 422, "`n` must be"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", 422, "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0,"echo":true})", 422, "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}})", 422, "response_format"},
      // No tools are offered: a choice that demands a tool call is refused by name, not ignored.
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]})", 422,
       "`tools` is not supported by this server: tool calling is not implemented"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", 422,
       "`tool_choice` \"required\" is not supported by this server: tool calling is not implemented"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[],"tool_choice":"required"})", 422, "`tool_choice` \"required\""},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function","function":{"name":"f"}}})", 422,
       "`tool_choice` naming a function is not supported by this server"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"any"})", 422,
       "`tool_choice` must be \"none\", \"auto\", \"required\" or an object naming a function, got \"any\""},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":5})", 422, "or an object naming a function, got number"},
      {R"({"messages":[{"role":"user","content":"x"}],"functions":[{"name":"f"}]})", 422, "`functions` is not supported by this server"},
      {R"({"messages":[{"role":"user","content":"x"}],"function_call":{"name":"f"}})", 422, "`function_call` naming a function is not supported"},
  };
  for (const auto& c : chat_cases) {
    OpenAiRequest r;
    auto e = chat(c.body, r);
    ASSERT_TRUE(e.has_value()) << c.body;
    EXPECT_EQ(e->status, c.status) << c.body;
    EXPECT_NE(e->message.find(c.mentions), std::string::npos) << e->message;
  }
}

TEST(OpenAiRequest, ChatPromptFormat) {
  OpenAiRequest r;
  ASSERT_FALSE(chat(R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]},
                                   {"role":"assistant","content":"Hello."},{"role":"user","content":"Tell me a story"}],
                       "max_completion_tokens":9,"logprobs":true,"top_logprobs":3,"temperature":0})", r));
  EXPECT_EQ(r.prompt, "System: Be brief.\n\nUser: Hi\n\nAssistant: Hello.\n\nUser: Tell me a story\n\nAssistant:");
  EXPECT_EQ(r.opts.max_new_tokens, 9);
  EXPECT_EQ(r.opts.top_logprobs, 3);
  EXPECT_EQ(r.opts.stop, std::vector<std::string>{"\nUser:"});
  EXPECT_EQ(format_chat_prompt({{"developer", "d"}}), "System: d\n\nAssistant:");
}

TEST(ServerOptions, ParseByteSize) {
  EXPECT_EQ(parse_byte_size("2GiB").value(), std::int64_t{2} << 30);
  EXPECT_EQ(parse_byte_size("512MiB").value(), std::int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5GB").value(), 1500000000);
  EXPECT_EQ(parse_byte_size("100000").value(), 100000);
  EXPECT_EQ(parse_byte_size("3K").value(), 3072);
  // Units in any case, as the flags' other values.
  EXPECT_EQ(parse_byte_size("1gib").value(), std::int64_t{1} << 30);
  EXPECT_EQ(parse_byte_size("512mib").value(), std::int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("512m").value(), std::int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("2 Gb").value(), 2000000000);
  EXPECT_EQ(parse_byte_size("7b").value(), 7);
  EXPECT_FALSE(parse_byte_size("lots").ok());
  EXPECT_FALSE(parse_byte_size("5 parsecs").ok());
  EXPECT_FALSE(parse_byte_size("-1GiB").ok());
  EXPECT_FALSE(parse_byte_size("1e30GiB").ok());
  // plain decimals only (strtod took these: 0x10 was 16 bytes)
  for (const char* bad : {"0x10", "1e9", "inf", "nan", ".", "1.2.3MiB", " 5", "+5"}) EXPECT_FALSE(parse_byte_size(bad).ok()) << bad;
  EXPECT_EQ(parse_byte_size("0").value(), 0);
  EXPECT_EQ(parse_byte_size(".5KiB").value(), 512);
}

TEST(SlotPool, SlotsForBudget) {
  // mamba2-2.7b: 168 MB state in fp32
  EXPECT_EQ(slots_for_budget(std::int64_t{2} << 30, 168000000, 128), 12);
  EXPECT_EQ(slots_for_budget(std::int64_t{2} << 30, 1600000, 128), 128);
  EXPECT_EQ(slots_for_budget(1000, 168000000, 128), 0);
}

TEST(Metrics, DurationHistogramsAreCumulativeWithSumAndCount) {
  Metrics m;
  for (double s : {0.0005, 0.001, 0.002, 0.7, 0.7, 400.0, -1.0}) m.request_duration.observe(s);
  m.request_duration.observe(std::nan(""));
  EXPECT_EQ(m.request_duration.count(), 8);
  const std::string t = m.render();
  // le is "≤": 0.001 counts in its own bucket; −1 and NaN count as 0 s; 400 s only in +Inf.
  EXPECT_NE(t.find("# HELP mamba_request_duration_seconds Requests that finished normally: seconds from admission to the last "
                   "token.\n# TYPE mamba_request_duration_seconds histogram\n"
                   "mamba_request_duration_seconds_bucket{le=\"0.001\"} 4\n"
                   "mamba_request_duration_seconds_bucket{le=\"0.0025\"} 5\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("mamba_request_duration_seconds_bucket{le=\"0.5\"} 5\nmamba_request_duration_seconds_bucket{le=\"1\"} 7\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("mamba_request_duration_seconds_bucket{le=\"300\"} 7\nmamba_request_duration_seconds_bucket{le=\"+Inf\"} 8\n"
                   "mamba_request_duration_seconds_sum 401.4035\nmamba_request_duration_seconds_count 8\n"),
            std::string::npos)
      << t;
  // Untouched histograms still render every bucket, at 0.
  EXPECT_NE(t.find("mamba_time_per_output_token_seconds_bucket{le=\"+Inf\"} 0\nmamba_time_per_output_token_seconds_sum 0\n"
                   "mamba_time_per_output_token_seconds_count 0\n"),
            std::string::npos)
      << t;
}

TEST(Metrics, PrometheusTextHasMeanBatchAndSlots) {
  Metrics m;
  m.decode_steps = 4;
  m.decode_batch_sum = 10;
  m.slots_total = 8;
  m.slots_in_use = 3;
  const std::string t = m.render();
  EXPECT_NE(t.find("# TYPE mamba_decode_batch_size_mean gauge\nmamba_decode_batch_size_mean 2.5\n"), std::string::npos) << t;
  EXPECT_NE(t.find("mamba_slots_in_use 3\n"), std::string::npos);
  EXPECT_NE(t.find("mamba_slots_total 8\n"), std::string::npos);
  EXPECT_NE(t.find("mamba_requests_total{outcome=\"ok\"} 0\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE mamba_decode_sequence_steps_total counter\nmamba_decode_sequence_steps_total 10\n"), std::string::npos) << t;
  // The exposition format's rules: HELP and TYPE once per metric, a counter's name ends in _total
  // (OpenMetrics parsers refuse a counter mamba_decode_batch_size_sum, its name before).
  std::istringstream lines(t);
  std::set<std::string> typed, helped;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream w(line);
    std::string hash, kind, name, type;
    w >> hash >> kind >> name >> type;
    if (hash != "#") continue;
    if (kind == "TYPE") {
      EXPECT_TRUE(typed.insert(name).second) << "TYPE twice: " << name;
      if (type == "counter") {
        EXPECT_TRUE(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0) << name;
      }
    } else if (kind == "HELP") {
      EXPECT_TRUE(helped.insert(name).second) << "HELP twice: " << name;
    }
  }
  EXPECT_EQ(typed, helped);
  EXPECT_GE(typed.size(), 15u);
}

// A syntax error names its line and column, never the body's text: nlohmann's "last read" quoted
// the prompt up to the bad byte (a secret, or 700 KB) into the answer and the server's log.
TEST(RequestBody, SyntaxErrorsDoNotQuoteTheBody) {
  json j;
  auto e = parse_body_object("{\"inputs\": \"my password is hunter2\nmore\"}", j);  // a raw newline in a string
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->message, "malformed JSON body: parse error at line 2, column 0: syntax error while parsing value - invalid string: "
                        "control character U+000A (LF) must be escaped to \\u000A or \\n");
  e = parse_body_object("{\"inputs\": \"secret \xff\"}", j);  // not UTF-8
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message.find("secret"), std::string::npos) << e->message;
  e = parse_body_object("{\"inputs\": \"x\" \"secret\"}", j);  // the "expected" part stays
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message.find("secret"), std::string::npos) << e->message;
  EXPECT_NE(e->message.find("expected '}'"), std::string::npos) << e->message;
}

// A NUL byte ended nlohmann's input, so a body with anything after one ran as the part before it
// (a proxy that reads the whole body would see another request than the server ran).
TEST(RequestBody, ANulByteIsASyntaxErrorNotTheEndOfTheBody) {
  using namespace std::string_literals;
  json j;
  auto e = parse_body_object("{\"inputs\":\"Hi\"}\0{\"inputs\":\"other\"}"s, j);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->message, "malformed JSON body: parse error at line 1, column 16: a NUL byte (byte 16 of 34), which JSON text cannot contain");
  e = parse_body_object("\0\0"s, j);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, "malformed JSON body: parse error at line 1, column 1: a NUL byte (byte 1 of 2), which JSON text cannot contain");
}

// Nesting is bounded at parse time: a prompt of 100 000 nested arrays (200 KB) crashed the server
// (the token-id message dumped the item, recursing once per level). Level 1 is the body object.
TEST(RequestBody, NestingDeeperThanTheLimitIs400) {
  auto nested = [](int levels_below_top) {
    return R"({"prompt":)" + std::string(static_cast<std::size_t>(levels_below_top), '[') + "1" +
           std::string(static_cast<std::size_t>(levels_below_top), ']') + "}";
  };
  json j;
  EXPECT_FALSE(parse_body_object(nested(kMaxJsonDepth - 1), j));  // kMaxJsonDepth levels in all
  for (int below : {kMaxJsonDepth, 100000, 1000000}) {
    auto e = parse_body_object(nested(below), j);
    ASSERT_TRUE(e) << below;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->message, fmt::format("malformed JSON body: arrays and objects nested more than {} levels deep", kMaxJsonDepth));
  }
  OpenAiRequest r;
  auto e = completion(nested(100000), r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 400);
  // Objects count as arrays do.
  std::string objs = "{";
  for (int i = 0; i < kMaxJsonDepth; ++i) objs += R"("a":{)";
  objs += std::string(static_cast<std::size_t>(kMaxJsonDepth) + 1, '}');
  EXPECT_TRUE(parse_body_object(objs, j));
  // A depth within the limit still gets the field's own message.
  e = completion(R"({"prompt":[[1,[2]]]})", r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("`prompt[0][1]` must be a token id"), std::string::npos) << e->message;
}

TEST(VllmTokenize, PromptOrMessagesWithVllmsFields) {
  auto parse = [](const std::string& text, VllmTokenizeRequest& r) {
    json j;
    if (auto e = parse_body_object(text, j)) return e;
    return parse_vllm_tokenize_request(j, r);
  };
  VllmTokenizeRequest r;
  ASSERT_FALSE(parse(R"({"model":"m","prompt":"Hi there"})", r));
  EXPECT_EQ(r.text, "Hi there");
  EXPECT_FALSE(r.chat);
  EXPECT_TRUE(r.add_special_tokens);
  EXPECT_FALSE(r.return_token_strs);
  r = {};
  ASSERT_FALSE(parse(R"({"messages":[{"role":"user","content":"Hi"}],"add_special_tokens":false,"return_token_strs":true})", r));
  EXPECT_TRUE(r.chat);
  EXPECT_EQ(r.text, "User: Hi\n\nAssistant:");  // what /v1/chat/completions runs
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_TRUE(r.return_token_strs);
  r = {};
  ASSERT_FALSE(parse(R"({"messages":[{"role":"user","content":"Hi"}],"add_generation_prompt":false})", r));
  EXPECT_EQ(r.text, "User: Hi\n\n");
  EXPECT_TRUE(r.add_special_tokens);  // the chat route's default, not vLLM's false (no template adds a BOS here)
  for (const auto& [body, needle] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt":"a","messages":[{"role":"user","content":"b"}]})", "not both"},
           {R"({"prompt":["a"]})", "`prompt`"},
           {R"({})", "`prompt` (a string) or `messages` is required"},
           {R"({"messages":[]})", "`messages` cannot be empty"},
           {R"({"prompt":"a","return_token_strs":"yes"})", "`return_token_strs`"},
           {R"({"prompt":"a","model":3})", "`model`"}}) {
    auto e = parse(body, r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->status, 422) << body;
    EXPECT_NE(e->message.find(needle), std::string::npos) << body << ": " << e->message;
  }
}

TEST(VllmTokenize, DetokenizeTakesTokenIds) {
  auto parse = [](const std::string& text, std::vector<std::int32_t>& ids) {
    json j;
    if (auto e = parse_body_object(text, j)) return e;
    return parse_vllm_detokenize_request(j, ids);
  };
  std::vector<std::int32_t> ids;
  ASSERT_FALSE(parse(R"({"tokens":[0, 5, 7.0, 2147483647]})", ids));
  EXPECT_EQ(ids, (std::vector<std::int32_t>{0, 5, 7, 2147483647}));
  ASSERT_FALSE(parse(R"({"tokens":[]})", ids));
  EXPECT_TRUE(ids.empty());
  for (const auto& [body, needle] : std::vector<std::pair<std::string, std::string>>{
           {R"({})", "`tokens` is required"},
           {R"({"tokens":"1 2"})", "`tokens` must be an array of token ids, got string"},
           {R"({"tokens":[1,-1]})", "`tokens[1]` must be a token id (an integer from 0 to 2147483647), got -1"},
           {R"({"tokens":[1.5]})", "got 1.5"},
           {R"({"tokens":[[1]]})", "`tokens[0]` must be a token id (an integer from 0 to 2147483647), got array"},
           {R"({"tokens":[2147483648]})", "`tokens[0]`"}}) {
    auto e = parse(body, ids);
    ASSERT_TRUE(e) << body;
    EXPECT_NE(e->message.find(needle), std::string::npos) << body << ": " << e->message;
  }
}

TEST(OpenAiRequest, TokenIdsMayBeIntegralFloats) {
  // As the other integer fields take them (a client that writes every number as a double).
  OpenAiRequest r;
  ASSERT_FALSE(completion(R"({"prompt":[41.0, 474, 0.0]})", r));
  EXPECT_EQ(r.prompt_ids, (std::vector<std::int32_t>{41, 474, 0}));
}

TEST(OpenAiRequest, UnreadFieldsAreNamedForTheLog) {
  // A typo and features the server lacks are named; what it reads, and what clients send routinely
  // to no effect here, are not.
  const json b = json::parse(R"({"messages": [], "max_tokenz": 5, "audio": {}, "modalities": ["audio"], "user": "u",
                                 "store": false, "metadata": {}, "max_tokens": 3, "stream": true, "logprobs": true,
                                 "parallel_tool_calls": false, "top_k": 5})");
  EXPECT_EQ(unread_openai_fields(b, /*chat=*/true), (std::vector<std::string>{"audio", "max_tokenz", "modalities"}));
  EXPECT_TRUE(unread_openai_fields(json::parse(R"({"prompt": "x", "echo": true, "suffix": null, "logprobs": 2})"), false).empty());
  // A field only the other route reads is not read here either (a fresh user's: max_completion_tokens
  // on /v1/completions did not limit the completion, and nothing said so).
  EXPECT_EQ(unread_openai_fields(json::parse(R"({"prompt": "x", "max_completion_tokens": 1, "messages": [], "top_logprobs": 3})"),
                                 false),
            (std::vector<std::string>{"max_completion_tokens", "messages", "top_logprobs"}));
  EXPECT_EQ(unread_openai_fields(json::parse(R"({"messages": [], "prompt": "x", "echo": true, "best_of": 1, "suffix": null})"), true),
            (std::vector<std::string>{"best_of", "echo", "prompt", "suffix"}));
}

}  // namespace
}  // namespace mamba::server
