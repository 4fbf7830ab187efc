// bench_forward: prefill and decode throughput of the CPU forward pass, 1 thread and all threads.
//
//   bench_forward [MODEL_DIR ...] [--prompt-len 512] [--decode-steps 64] [--batch 1] [--threads 1,0]
//
// With no MODEL_DIR it measures the embedded default model. Prompt ids are seeded-random valid ids;
// decode feeds back the greedy token. Prints one table row per (model, threads): prefill tokens/s
// (one prefill of --prompt-len tokens, last logits only) and decode tokens/s (--decode-steps steps
// of a batch of --batch sequences; tokens/s counts every sequence's token).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "mamba/model.h"
#include "ops/ops.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// CPU seconds used by the whole process so far (all threads).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::int32_t argmax(const float* row, std::int64_t n) {
  return static_cast<std::int32_t>(std::max_element(row, row + n) - row);
}

struct Row {
  double prefill_tps = 0, decode_tps = 0;
  double cpu_share = 0;  ///< CPU seconds ÷ (wall seconds × threads) over both phases: < 1 when the machine is shared
};

mamba::Result<Row> measure(mamba::Model& model, int prompt_len, int decode_steps, int batch) {
  const std::int64_t V = model.logits_width();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(std::min<std::int64_t>(V, 8192) - 1));
  std::vector<std::int32_t> prompt(static_cast<std::size_t>(prompt_len));
  for (auto& t : prompt) t = id(rng);

  Row row;
  std::vector<mamba::State> states;
  std::vector<float> logits(static_cast<std::size_t>(V * batch));
  // Warm-up (grows scratch buffers, faults in the weights), then timed prefill.
  {
    mamba::State warm = model.new_state();
    MAMBA_RETURN_IF_ERROR(model.prefill({prompt.data(), std::min<std::size_t>(prompt.size(), 16)}, warm,
                                        mamba::LogitsMode::kLast, logits.data()));
  }
  for (int b = 0; b < batch; ++b) states.push_back(model.new_state());
  const double cpu0 = process_cpu_seconds();
  const auto start = Clock::now();
  auto t0 = Clock::now();
  MAMBA_RETURN_IF_ERROR(model.prefill(prompt, states[0], mamba::LogitsMode::kLast, logits.data()));
  row.prefill_tps = prompt_len / seconds_since(t0);
  for (int b = 1; b < batch; ++b) states[static_cast<std::size_t>(b)] = states[0].clone();

  std::vector<mamba::State*> ptrs;
  for (auto& s : states) ptrs.push_back(&s);
  std::vector<std::int32_t> toks(static_cast<std::size_t>(batch), argmax(logits.data(), V));
  MAMBA_RETURN_IF_ERROR(model.step(toks, ptrs, logits.data()));  // warm-up step
  t0 = Clock::now();
  for (int s = 0; s < decode_steps; ++s) {
    for (int b = 0; b < batch; ++b) toks[static_cast<std::size_t>(b)] = argmax(logits.data() + b * V, V);
    MAMBA_RETURN_IF_ERROR(model.step(toks, ptrs, logits.data()));
  }
  row.decode_tps = double(decode_steps) * batch / seconds_since(t0);
  row.cpu_share = (process_cpu_seconds() - cpu0) / (seconds_since(start) * mamba::ops::num_threads());
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prefill and decode throughput of the CPU forward pass"};
  std::vector<std::string> dirs;
  int prompt_len = 512, decode_steps = 64, batch = 1;
  std::vector<int> threads = {1, 0};
  app.add_option("models", dirs, "model directories (default: the embedded model)");
  app.add_option("--prompt-len", prompt_len, "prefill length in tokens")->check(CLI::Range(1, 1 << 20));
  app.add_option("--decode-steps", decode_steps, "decode steps to time")->check(CLI::Range(1, 1 << 20));
  app.add_option("--batch", batch, "sequences per decode step")->check(CLI::Range(1, 1024));
  app.add_option("--threads", threads, "thread counts to measure (0 = all)")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  if (dirs.empty()) dirs.push_back(MAMBA_SOURCE_MODEL_DIR);

  fmt::print("{:<40} {:>7} {:>16} {:>16} {:>9}\n", "model", "threads", "prefill tok/s", "decode tok/s", "cpu share");
  for (const auto& dir : dirs) {
    auto model = mamba::Model::load(dir);
    if (!model.ok()) {
      fmt::print(stderr, "error: {}\n", model.error().message);
      return 1;
    }
    for (int t : threads) {
      mamba::ops::set_num_threads(t);
      auto row = measure(*model.value(), prompt_len, decode_steps, batch);
      if (!row.ok()) {
        fmt::print(stderr, "error: {}\n", row.error().message);
        return 1;
      }
      std::string name = dir.size() > 40 ? "…" + dir.substr(dir.size() - 39) : dir;
      fmt::print("{:<40} {:>7} {:>16.1f} {:>16.1f} {:>8.0f}%\n", name, mamba::ops::num_threads(), row->prefill_tps,
                 row->decode_tps, 100.0 * row->cpu_share);
      std::fflush(stdout);
    }
  }
  fmt::print("(prompt {} tokens; decode {} steps × batch {}; cpu share < 100% means other processes took the cores:\n"
             " the figures then understate this machine's speed)\n", prompt_len, decode_steps, batch);
  return 0;
}
