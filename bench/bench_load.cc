// bench_load: checkpoint load time. Goal (issue 2): a 2.8b-sized bf16 checkpoint loads in < 0.5 s
// warm, dominated by page-in. Make one with
//   /usr/bin/python3 ../shared/tools/make_checkpoint.py mamba-2.8b /tmp/m28 --dtype bf16
// then: bench_load /tmp/m28 [--reps 5]   (no model: $MAMBA_MODEL, else the embedded model)
//
// Columns: open = Checkpoint::open (config + headers + mmap), bind = bind_weights (table checks),
// page-in = reading one byte per 4 KiB page of every tensor (what the first forward pass pays),
// total = open + bind + page-in. Warm = file already in the page cache (after the first rep).
// Measured here (2 vCPUs, shared, 5.16 GiB mamba-2.8b bf16 in 2 shards): warm total ≈ 350 ms
// (open 25 ms, bind 0.2 ms, page-in ≈ 320 ms at ≈ 17 GB/s); cold (from disk) ≈ 21 s. Prefaulting
// the whole mapping in open (MADV_POPULATE_READ) was slower warm (≈ 435 ms), so weights stay lazy.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <vector>

#include "cpu/parse_args.h"
#include "mamba/checkpoint.h"
#include "mamba/weights.h"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Rep {
  double open = 0, bind = 0, page_in = 0;
  double total() const { return open + bind + page_in; }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_load: checkpoint open + bind + page-in time"};
  std::string model;
  int reps = 5;
  // The model as a positional argument like the other bench programs (--model kept).
  std::string model_flag;
  app.add_option("model", model, "model directory or HF repo id (default: $MAMBA_MODEL, else the embedded model)");
  app.add_option("--model", model_flag, "the same as the positional argument");
  app.add_option("--reps", reps, "repetitions (the first one may be cold)")->check(CLI::Range(1, 100))->capture_default_str();
  if (const auto rc = mamba::bench::parse_args(app, argc, argv)) return *rc;
  // One model: given both ways it is an error (one of them used to be ignored silently).
  if (!model_flag.empty() && !model.empty()) {
    std::fprintf(stderr, "error: give the model once, as the argument or with --model (got '%s' and --model '%s')\n",
                 model.c_str(), model_flag.c_str());
    return 2;
  }
  if (!model_flag.empty()) model = model_flag;
  if (model.empty())
    if (const auto rc = mamba::bench::default_model(model)) return *rc;

  auto dir = mamba::resolve_model_path(model);
  if (!dir.ok()) {
    std::fprintf(stderr, "error: %s\n", dir.error().message.c_str());
    return 2;  // as the other bench programs: a model that cannot be found is a bad argument
  }
  std::vector<Rep> results;
  std::size_t weight_bytes = 0, n_tensors = 0;
  std::string arch;
  for (int r = 0; r < reps; ++r) {
    Rep rep;
    double t0 = now_s();
    auto ck = mamba::Checkpoint::open(*dir);
    if (!ck.ok()) {
      std::fprintf(stderr, "error: %s\n", ck.error().message.c_str());
      return 2;  // a model that does not open is a bad argument too
    }
    double t1 = now_s();
    auto w = mamba::bind_weights(*ck);
    if (!w.ok()) {
      std::fprintf(stderr, "error: %s\n", w.error().message.c_str());
      return 1;
    }
    double t2 = now_s();
    std::uint64_t sum = 0;
    for (const auto& t : ck->tensors()) {
      const auto* b = static_cast<const std::uint8_t*>(t.view.data);
      const std::size_t n = t.view.nbytes();
      for (std::size_t i = 0; i < n; i += 4096) sum += b[i];
    }
    volatile std::uint64_t keep = sum;
    (void)keep;
    double t3 = now_s();
    rep.open = t1 - t0;
    rep.bind = t2 - t1;
    rep.page_in = t3 - t2;
    results.push_back(rep);
    weight_bytes = ck->weight_bytes();
    n_tensors = ck->tensors().size();
    arch = fmt::format("{} d_model {} × {} layers", mamba::arch_name(ck->config().arch), ck->config().d_model, ck->config().n_layer);
  }
  fmt::print("model: {}  ({}; {} tensors, {:.2f} GiB of weights)\n\n", *dir, arch, n_tensors, weight_bytes / double(1 << 30));
  fmt::print("{:>5} {:>10} {:>10} {:>10} {:>10} {:>12}\n", "rep", "open ms", "bind ms", "page-in ms", "total ms", "page-in GB/s");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Rep& r = results[i];
    fmt::print("{:>5} {:>10.2f} {:>10.2f} {:>10.1f} {:>10.1f} {:>12.1f}\n", i == 0 ? std::string("1st") : std::to_string(i + 1), r.open * 1e3,
               r.bind * 1e3, r.page_in * 1e3, r.total() * 1e3, weight_bytes / r.page_in / 1e9);
  }
  if (results.size() > 1) {
    std::vector<double> warm;
    for (std::size_t i = 1; i < results.size(); ++i) warm.push_back(results[i].total());
    std::sort(warm.begin(), warm.end());
    const double med = warm[warm.size() / 2];
    fmt::print("\nwarm median total: {:.1f} ms  (goal < 500 ms: {})\n", med * 1e3, med < 0.5 ? "met" : "NOT met");
  }
  return 0;
}
