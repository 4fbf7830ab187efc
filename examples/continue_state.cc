// Prompt caching and a second turn with generate(): a shared prefix is prefilled once, two
// sampled continuations branch from copies of its State, and one of them is continued with more
// text without re-reading anything before it.
//
//   examples/continue_state [MODEL]       prints both branches and the continued one
//
// Build against the library as in README §Using the library (add_subdirectory + mamba::mamba).
#include <cstdio>
#include <string>
#include <vector>

#include "mamba/checkpoint.h"
#include "mamba/generate.h"
#include "mamba/model.h"
#include "mamba/tokenizer.h"

int main(int argc, char** argv) {
  using namespace mamba;
  auto fail = [](const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.message.c_str());
    return 2;
  };
  std::string ref = argc > 1 ? argv[1] : "";
  if (ref.empty()) {  // $MAMBA_MODEL, else the embedded model
    auto def = resolve_default_model();
    if (!def.ok()) return fail(def.error());
    ref = *def;
  }
  auto model = Model::load(ref);
  if (!model.ok()) return fail(model.error());
  Model& m = **model;
  auto tok = Tokenizer::from_file(m.checkpoint().dir() + "/tokenizer.json");
  if (!tok.ok()) return fail(tok.error());
  auto prefix = tok->encode("The old man looked at the sea and", /*add_special_tokens=*/true);
  if (!prefix.ok()) return fail(prefix.error());

  // 1. The prefix without its last token, once (max_new_tokens 0: prefill only). Its last token
  //    is fed by each branch, whose first sample needs that token's logits.
  State prefix_state = m.new_state();
  GenerateOptions prefill_only;
  prefill_only.max_new_tokens = 0;
  const std::span<const std::int32_t> all(*prefix);
  if (all.size() > 1) {
    auto r = generate(m, &*tok, prefix_state, all.first(all.size() - 1), prefill_only);
    if (!r.ok()) return fail(r.error());
  }

  // 2. Two sampled branches, each from its own copy of the prefix's state.
  GenerateOptions opts;
  opts.max_new_tokens = 12;
  opts.sampling.do_sample = true;
  opts.sampling.temperature = 0.8f;
  opts.sampling.top_p = 0.95f;
  opts.sampling.has_seed = true;
  std::vector<State> branches;
  std::vector<GenerateResult> results;
  for (std::uint64_t seed : {1u, 2u}) {
    branches.push_back(prefix_state.clone());
    opts.sampling.seed = seed;
    auto r = generate(m, &*tok, branches.back(), all.last(1), opts);
    if (!r.ok()) return fail(r.error());
    std::printf("branch %llu:%s\n", static_cast<unsigned long long>(seed), r->text.c_str());
    results.push_back(std::move(*r));
  }

  // 3. A second turn on branch 1: its state holds everything but its last sampled token, so the
  //    next prompt starts with that token, then the new text.
  if (results[0].tokens.empty()) return 0;
  std::vector<std::int32_t> turn{results[0].tokens.back().id};
  auto more = tok->encode(" Then he said");
  if (!more.ok()) return fail(more.error());
  turn.insert(turn.end(), more->begin(), more->end());
  // Greedy: default sampling parameters (do_sample = false alone would not do: as in TGI, a
  // temperature ≠ 1 or top_p < 1 still turns sampling on).
  opts.sampling = SamplingParams{};
  auto r = generate(m, &*tok, branches[0], turn, opts);
  if (!r.ok()) return fail(r.error());
  std::printf("branch 1, continued: Then he said%s\n", r->text.c_str());
  return 0;
}
