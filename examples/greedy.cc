// The library in one screen: load a model (a directory, an HF cache id, or the embedded default),
// tokenize a prompt, prefill it and decode greedily with Model::step — what `mamba-cli run` does
// for greedy decoding, without the sampler (see generate() in mamba/generate.h for that).
//
//   examples/greedy [MODEL] [PROMPT] [N]      prints the N generated tokens' text (default 16; no
//                                             stop at EOS: `mamba-cli run --ignore-eos` gives the same)
//
// Build against the library as in README §Using the library (add_subdirectory + mamba::mamba).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "mamba/checkpoint.h"
#include "mamba/generate.h"
#include "mamba/model.h"
#include "mamba/tokenizer.h"

int main(int argc, char** argv) {
  using namespace mamba;
  std::string ref = argc > 1 ? argv[1] : "";
  const std::string prompt = argc > 2 ? argv[2] : "It was a dark and stormy night";
  const int n = argc > 3 ? std::atoi(argv[3]) : 16;
  auto fail = [](const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.message.c_str());
    return 2;
  };
  if (ref.empty()) {  // $MAMBA_MODEL, else the embedded model
    auto def = resolve_default_model();
    if (!def.ok()) return fail(def.error());
    ref = *def;
  }
  auto model = Model::load(ref);  // errors name the file / tensor / field
  if (!model.ok()) return fail(model.error());
  Model& m = **model;
  auto tok = Tokenizer::from_file(m.checkpoint().dir() + "/tokenizer.json");
  if (!tok.ok()) return fail(tok.error());
  auto ids = tok->encode(prompt);
  if (!ids.ok()) return fail(ids.error());

  State state = m.new_state();                               // conv_state + ssm_state, fp32, zeroed
  std::vector<float> logits(std::size_t(m.logits_width()));  // [logits_width] for the last token
  if (Status s = m.prefill(*ids, state, LogitsMode::kLast, logits); !s.ok()) return fail(s.error());
  std::vector<std::int32_t> out;
  for (int i = 0; i < n; ++i) {
    // Greedy (the first maximum, as torch.argmax) over the ids the tokenizer and config define:
    // the logits rows past them are padding.
    const auto end = logits.begin() + vocab_limit(&*tok, m);
    const auto next = static_cast<std::int32_t>(std::max_element(logits.begin(), end) - logits.begin());
    out.push_back(next);
    State* states[] = {&state};
    if (Status s = m.step({&next, 1}, states, logits); !s.ok()) return fail(s.error());
  }
  auto text = tok->decode(out);
  if (!text.ok()) return fail(text.error());
  std::printf("%s\n", text->c_str());
  return 0;
}
