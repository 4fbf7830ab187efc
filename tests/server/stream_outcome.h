// What a request's stream delivered, gathered until it finishes: the scheduler tests compare these
// field by field (bitwise) between a request run alone and the same request among others.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "mamba/generate.h"
#include "mamba/model.h"
#include "mamba/tokenizer.h"
#include "server/request_stream.h"
#include "server/scheduler.h"

namespace mamba::test {

struct Outcome {
  std::vector<std::int32_t> ids;
  std::vector<float> logprobs;
  std::vector<std::vector<std::pair<std::int32_t, float>>> top;  ///< top logprobs per token
  std::vector<std::string> token_texts;
  std::string text;                                                ///< the text deltas joined
  std::vector<float> prompt_logprobs;
  FinishReason finish = FinishReason::kNone;
  int cached_tokens = 0;  ///< SequenceStats::cached_tokens
};

/// Takes the stream's updates until it is done (a test failure if it reports an error, or if it
/// does not finish within ~max_waits × 100 ms of silence).
inline Outcome drain(server::RequestStream& s, int max_waits = 10000) {
  using namespace std::chrono_literals;
  Outcome o;
  for (int guard = 0; guard < max_waits; ++guard) {
    server::RequestStream::Update u;
    if (!s.take(u, 100ms)) continue;
    for (auto& t : u.tokens) {
      o.ids.push_back(t.id);
      o.logprobs.push_back(t.logprob);
      o.top.push_back(t.top);
      o.token_texts.push_back(t.token_text);
      o.text += t.text_delta;
    }
    if (u.done) {
      EXPECT_FALSE(u.error) << u.error->message;
      o.finish = s.stats().finish;
      o.prompt_logprobs = s.stats().prompt_logprobs;
      o.cached_tokens = s.stats().cached_tokens;
      return o;
    }
  }
  ADD_FAILURE() << "stream did not finish";
  return o;
}

/// The reference the concurrent runs are compared with: each request alone, one after another, on a
/// one-slot scheduler over `model` (tokenizer `tok`, may be null) with an ample prefill budget.
inline std::vector<Outcome> run_each_alone(Model& model, const Tokenizer* tok,
                                           const std::vector<server::SequenceRequest>& reqs) {
  using namespace std::chrono_literals;
  std::vector<Outcome> alone;
  server::Metrics metrics;
  server::SchedulerOptions so;
  so.slots = 1;
  so.max_batch_prefill_tokens = 100000;
  server::Scheduler sch(model, tok, {}, so, metrics);
  sch.start();
  for (const auto& r : reqs) {
    auto s = sch.submit(r);
    EXPECT_NE(s, nullptr);
    alone.push_back(s ? drain(*s) : Outcome{});
  }
  sch.stop(1s);
  return alone;
}

}  // namespace mamba::test
