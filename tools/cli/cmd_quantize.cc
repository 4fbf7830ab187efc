// `mamba-cli quantize -m IN --type q8|q4 -o OUT`: writes a q8 / q4 copy of a checkpoint
// (format: include/mamba/quantize.h, README §"Quantized weights").
#include <cstdio>
#include <fmt/format.h>
#include <string>

#include "cli/command.h"
#include "cli/signal_cleanup.h"
#include "mamba/checkpoint.h"
#include "mamba/quantize.h"

namespace mamba::cli {
namespace {

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  throw CLI::RuntimeError(1);
}

struct QuantizeArgs {
  std::string model, type, out;
};

void run_quantize(const QuantizeArgs& a) {
  QuantType type;
  if (a.type == "q8") type = QuantType::kQ8;
  else if (a.type == "q4") type = QuantType::kQ4;
  else die(fmt::format("--type must be q8 or q4, got \"{}\"", a.type));
  auto dir = resolve_model_path(a.model);
  if (!dir.ok()) die(dir.error().message);
  auto rep = [&] {
    // Ctrl-C / kill while writing must not leave the ".OUT.tmp-PID" directory behind.
    SignalCleanup cleanup(quantize_temp_dir(a.out), quantize_output_files());
    return quantize_checkpoint(*dir, type, a.out);
  }();
  if (!rep.ok()) die(rep.error().message);
  for (const std::string& d : rep->removed_stale)
    std::fprintf(stderr, "note: removed %s, left by an interrupted quantize (its process is gone)\n", d.c_str());
  std::fprintf(stderr, "quantized %d tensors to %s (group size %d), %d small tensors stored F32", rep->quantized, a.type.c_str(),
               kQuantGroupSize, rep->f32);
  if (rep->kept > 0)
    std::fprintf(stderr, ", %d projections kept in their stored dtype (K not a multiple of %d: %s%s)", rep->kept, kQuantGroupSize,
                 rep->kept_names.c_str(), rep->kept > 3 ? ", ..." : "");
  std::fprintf(stderr, "\n%.1f MiB → %.1f MiB: %s\n", static_cast<double>(rep->in_bytes) / (1 << 20),
               static_cast<double>(rep->out_bytes) / (1 << 20), a.out.c_str());
}

const CommandRegistrar kQuantize("quantize", 50, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("quantize", "Write a q8 / q4 (group-wise int8 / 4-bit) copy of a checkpoint");
  auto a = std::make_shared<QuantizeArgs>();
  cmd->add_option("-m,--model", a->model, "input model directory or HF repo id ORG/NAME[@REV] (any format mamba.cpp loads)")
      ->required()
      ->check(non_empty("a model directory or HF repo id ORG/NAME"));
  cmd->add_option("--type", a->type, "q8 (int8 codes) or q4 (4-bit codes); group size 32, f32 scales")->required();
  cmd->add_option("-o,--output", a->out, "output directory (must not exist; written under a temporary name, then renamed)")
      ->required()
      ->check(non_empty("a directory path that does not exist yet"));
  cmd->callback([a] { run_quantize(*a); });
});

}  // namespace
}  // namespace mamba::cli
