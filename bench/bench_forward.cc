// bench_forward: prefill and decode throughput of the CPU forward pass, 1 thread and all threads.
//
//   bench_forward [MODEL_DIR ...] [--prompt-len 512] [--decode-steps 64] [--batch 1] [--threads 1,0]
//                 [--precision auto|exact|bf16|int8]
//
// With no MODEL_DIR it measures $MAMBA_MODEL, else the embedded default model. Prompt ids are seeded-random valid ids;
// decode feeds back the greedy token (bench/cpu/forward_timing.h). Prints one table row per (model,
// threads): prefill tokens/s (the fastest of 3 prefills of --prompt-len tokens after an untimed one,
// last logits only) and decode
// tokens/s (--decode-steps steps of a batch of --batch sequences; tokens/s counts every sequence's
// token). bench_cpu measures the same against the machine's ceilings.
#include <optional>
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "cpu/forward_timing.h"
#include "cpu/parse_args.h"
#include "mamba/checkpoint.h"
#include "mamba/model.h"
#include "ops/cpu/cpu_target.h"
#include "ops/ops.h"
#include "common/option_rules.h"
#include "common/thread_warning.h"

namespace {

struct Row {
  double prefill_tps = 0, decode_tps = 0;
  /// CPU seconds ÷ (wall seconds × threads) over the phases long enough to measure it (none when
  /// neither is; forward_timing.h): < 1 when the machine is shared
  std::optional<double> cpu_share;
};

mamba::Result<Row> measure(mamba::Model& model, int prompt_len, int decode_steps, int batch) {
  MAMBA_ASSIGN_OR_RETURN(auto prefill, mamba::bench::time_prefill(model, prompt_len));
  MAMBA_ASSIGN_OR_RETURN(auto decode, mamba::bench::time_decode(model, batch, decode_steps));
  Row row;
  row.prefill_tps = prefill.tokens_per_s;
  row.decode_tps = decode.tokens_per_s;
  double weighted = 0, seconds = 0;
  for (const mamba::bench::Timed* t : {static_cast<const mamba::bench::Timed*>(&prefill), static_cast<const mamba::bench::Timed*>(&decode)}) {
    if (!t->cpu_share) continue;
    weighted += *t->cpu_share * t->seconds;
    seconds += t->seconds;
  }
  if (seconds > 0) row.cpu_share = weighted / seconds;
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prefill and decode throughput of the CPU forward pass"};
  std::vector<std::string> dirs;
  int prompt_len = 512, decode_steps = 64, batch = 1;
  std::vector<int> threads = {1, 0};
  app.add_option("models", dirs, "model directories or HF cache refs (default: $MAMBA_MODEL, else the embedded model)");
  app.add_option("--prompt-len", prompt_len, "prefill length in tokens")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--decode-steps", decode_steps, "decode steps to time")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--batch", batch, "sequences per decode step")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--threads", threads, "thread counts to measure, comma-separated (0 = all)")
      ->delimiter(',')
      ->allow_extra_args(false)  // `--threads 2 MODEL` must not read MODEL as a thread count
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  std::string precision = "auto";
  app.add_option("--precision", precision,
                 "projection arithmetic the models load with: auto (default), exact, bf16 or int8 (README §Precision)")
      ->transform(mamba::cli::precision_tier())
      ->capture_default_str();
  if (const auto rc = mamba::bench::parse_args(app, argc, argv)) return *rc;
  mamba::LoadOptions load_options;
  load_options.precision = mamba::parse_precision(precision).value();  // checked above
  if (threads.empty()) {
    fmt::print(stderr, "error: --threads needs at least one value\n");
    return 2;
  }
  if (dirs.empty()) {
    if (const auto rc = mamba::bench::default_model(dirs.emplace_back())) return *rc;
  }
  // Thread counts as they resolve (0 = all), each measured once.
  std::vector<int> counts;
  for (int t : threads) {
    mamba::ops::set_num_threads(t);
    const int n = mamba::ops::num_threads();
    if (std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
  }
  // Every model loads before anything is measured or printed (a bad path ends the run at once).
  std::vector<std::unique_ptr<mamba::Model>> models;
  for (const auto& dir : dirs) {
    auto model = mamba::Model::load(dir, load_options);
    if (!model.ok()) {
      fmt::print(stderr, "error: {}\n", model.error().message);
      return 2;  // as bench_cpu: a model that does not load is a bad argument
    }
    models.push_back(std::move(model).value());
  }

  // Which kernels ran (MAMBA_CPU_TARGET may force another), and threads beyond the CPUs, which only
  // take turns on them (as mamba-cli and mamba-server warn).
  fmt::print("cpu: {}\n", mamba::ops::cpu::cpu_dispatch_description());
  std::fflush(stdout);
  for (int t : threads) mamba::tools::warn_if_more_threads_than_cpus(t, "--threads");
  fmt::print("{:<40} {:>7} {:>16} {:>16} {:>9}\n", "model", "threads", "prefill tok/s", "decode tok/s", "cpu share");
  for (std::size_t i = 0; i < models.size(); ++i) {
    const std::string& dir = dirs[i];
    for (int t : counts) {
      mamba::ops::set_num_threads(t);
      std::optional<mamba::Result<Row>> measured;
      try {
        measured.emplace(measure(*models[i], prompt_len, decode_steps, batch));
      } catch (const std::bad_alloc&) {
        fmt::print(stderr, "error: {}: out of memory (lower --batch or --prompt-len)\n", dir);
        return 1;
      }
      const mamba::Result<Row>& row = *measured;
      if (!row.ok()) {
        fmt::print(stderr, "error: {}\n", row.error().message);
        return 1;
      }
      // The directory (its end when long) and the tier it computed in (auto's choice is per model).
      const std::string tier = fmt::format(" [{}]", mamba::precision_name(models[i]->precision()));
      const std::size_t room = 40 - tier.size();
      std::string name = (dir.size() > room ? "…" + dir.substr(dir.size() - (room - 1)) : dir) + tier;
      fmt::print("{:<40} {:>7} {:>16.1f} {:>16.1f} {:>9}\n", name, mamba::ops::num_threads(), row->prefill_tps,
                 row->decode_tps, row->cpu_share ? fmt::format("{:.0f}%", 100.0 * *row->cpu_share) : "-");
      std::fflush(stdout);
    }
  }
  // The tiers the models compute in (auto resolves per checkpoint: bf16 weights on an AVX-512 BF16 CPU → bf16).
  std::vector<std::string> tiers;
  for (const auto& m : models)
    if (const std::string t = mamba::precision_name(m->precision()); std::find(tiers.begin(), tiers.end(), t) == tiers.end())
      tiers.push_back(t);
  if (precision == "auto") precision = fmt::format("auto: {}", fmt::join(tiers, ", "));
  fmt::print("(precision {}; prompt {} tokens; decode {} steps × batch {}; cpu share well below 100% means other processes\n"
             " took the cores: the figures then understate this machine's speed. The baseline target reads ~80% at 2 threads\n"
             " on an idle machine: its threads wait on each other, not on other processes)\n", precision, prompt_len, decode_steps, batch);
  return 0;
}
