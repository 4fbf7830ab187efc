// `mamba-cli inspect [MODEL]`: architecture, sizes, dtypes, parameter count, weight bytes,
// per-sequence state bytes and the tokenizer's size / special tokens of a model directory or a
// cached HF repo id (default: the embedded model). Validates every tensor like a real load.
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/run_common.h"
#include "common/out_of_memory.h"
#include "mamba/checkpoint.h"
#include "mamba/generate.h"
#include "mamba/tokenizer.h"
#include "mamba/weights.h"

namespace mamba::cli {
namespace {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", b, units[u]) : fmt::format("{:.2f} {}", b, units[u]);
}

std::string human_count(double n) {
  if (n >= 1e9) return fmt::format("{:.2f}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.2f}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.1f}K", n / 1e3);
  return fmt::format("{:.0f}", n);
}

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  throw CLI::RuntimeError(1);
}

void run_inspect(const std::string& model_arg) {
  auto dir = model_arg.empty() ? resolve_default_model() : resolve_model_path(model_arg);
  if (!dir.ok()) die(dir.error().message);
  auto ck = Checkpoint::open(*dir);
  if (!ck.ok()) die(ck.error().message);
  auto w = bind_weights(*ck);
  if (!w.ok()) die(w.error().message);
  const ModelConfig& c = ck->config();
  // What `run` would load next: the tokenizer when there is a tokenizer.json, and the EOS ids
  // (generation_config.json first). A file `run` would refuse fails here too, before any output.
  auto tok_path = model_tokenizer_file(*dir, "");
  if (!tok_path.ok()) die(tok_path.error().message);
  std::optional<Tokenizer> tok;
  if (*tok_path) {
    auto t = tools::load_tokenizer(**tok_path);
    if (!t.ok()) die(t.error().message);
    tok = std::move(*t);
  }
  auto eos_ids = model_eos_ids(*dir, c);  // without the tokenizer's fallback: labelled below when that is used
  if (!eos_ids.ok()) die(eos_ids.error().message);
  const bool model_has_eos = !eos_ids->empty();
  if (!model_has_eos && tok) {
    eos_ids = model_eos_ids(*dir, c, &*tok);
    if (!eos_ids.ok()) die(eos_ids.error().message);
  }

  // Unique bound tensors (a tied lm_head is the embedding: counted once).
  std::set<const void*> seen, seen_scales;  // the stored tensors the model reads (codes, scales)
  std::map<std::string, std::int64_t> bytes_by_dtype;
  std::int64_t params = 0, bytes = 0;
  auto count = [&](const TensorView& v) {
    if (v.scales != nullptr) seen_scales.insert(v.scales);
    if (v.empty() || !seen.insert(v.data).second) return;
    params += v.numel();
    // Quantized weights: codes + their F32 scales (one per group_size weights).
    const std::int64_t b = static_cast<std::int64_t>(v.nbytes()) + (v.scales != nullptr ? v.numel() / v.group_size * 4 : 0);
    bytes += b;
    bytes_by_dtype[dtype_name(v.dtype)] += b;
  };
  count(w->embedding);
  count(w->norm_f);
  count(w->lm_head);
  for (const auto& L : w->layers) {
    for (const TensorView* v : {&L.norm, &L.in_proj, &L.in_proj_bias, &L.conv1d_weight, &L.conv1d_bias, &L.out_proj, &L.out_proj_bias,
                                &L.A_log, &L.D, &L.x_proj, &L.dt_proj, &L.dt_proj_bias, &L.dt_bias, &L.gated_norm})
      count(*v);
  }
  // Stored tensors no weight of the model uses (HF warns about them as "not used"): a tied
  // checkpoint's copy of lm_head, leftovers of a conversion, a misspelled name.
  std::vector<std::string> unused;
  for (const TensorEntry& e : ck->tensors())
    if (!seen.count(e.view.data) && !seen_scales.count(e.view.data)) unused.push_back(e.name);
  std::string dtypes;
  for (const auto& [name, b] : bytes_by_dtype) dtypes += fmt::format("{}{} ({})", dtypes.empty() ? "" : ", ", name, human_bytes(static_cast<double>(b)));

  // The files the tensors came from (the one format Checkpoint::open chose, when a directory holds several).
  std::set<std::string> files;
  for (const TensorEntry& e : ck->tensors()) files.insert(std::filesystem::path(e.file).filename().string());
  std::string file_list;
  for (const auto& f : files) file_list += (file_list.empty() ? "" : ", ") + f;
  fmt::print("model            {}\n", *dir);
  fmt::print("weights file{}    {}\n", files.size() == 1 ? " " : "s", file_list);
  if (!unused.empty())
    fmt::print("unused tensors   {} not read by the model: {}{}\n", unused.size(), unused.front(),
               unused.size() > 1 ? fmt::format(", … ({} more)", unused.size() - 1) : "");
  fmt::print("architecture     {} ({} format)\n", arch_name(c.arch), c.format == CheckpointFormat::kHF ? "HF" : "state-spaces");
  fmt::print("layers           {}\n", c.n_layer);
  fmt::print("d_model          {}\n", c.d_model);
  fmt::print("d_inner          {}  (expand {})\n", c.d_inner, c.expand);
  fmt::print("d_state          {}\n", c.d_state);
  fmt::print("d_conv           {}\n", c.d_conv);
  if (c.arch == Arch::kMamba2) {
    fmt::print("n_heads          {} × head_dim {}\n", c.n_heads, c.head_dim);
    fmt::print("n_groups         {}\n", c.n_groups);
    fmt::print("chunk_size       {}\n", c.chunk_size);
    if (c.d_mlp > 0) fmt::print("d_mlp            {}\n", c.d_mlp);
    fmt::print("time_step_limit  [{}, {}]\n", c.time_step_min_limit, c.time_step_max_limit);
  } else {
    fmt::print("dt_rank          {}\n", c.dt_rank);
  }
  if (c.arch == Arch::kFalconMamba) fmt::print("mixer_rms_eps    {}\n", c.mixer_rms_eps);
  fmt::print("norm eps         {}\n", c.norm_eps);
  fmt::print("biases           conv1d {}, in/out_proj {}\n", c.conv_bias ? "yes" : "no", c.proj_bias ? "yes" : "no");
  fmt::print("vocab            {} (logits width {})\n", c.vocab_size, c.padded_vocab_size());
  fmt::print("lm_head          {}\n", c.tie_embeddings ? "tied to the embedding" : "untied");
  fmt::print("dtype            {}\n", dtypes);
  if (!c.quant_type.empty()) fmt::print("quantization     {} (group size {}, F32 scales; mamba-cli quantize)\n", c.quant_type, c.quant_group_size);
  fmt::print("parameters       {} ({})\n", params, human_count(static_cast<double>(params)));
  fmt::print("weight bytes     {} ({})\n", bytes, human_bytes(static_cast<double>(bytes)));
  fmt::print("state / sequence {} ({}: conv_state {} + ssm_state {} fp32 per layer)\n", c.state_bytes(),
             human_bytes(static_cast<double>(c.state_bytes())), c.conv_state_elems(), c.ssm_state_elems());

  std::string eos;
  for (auto e : *eos_ids) eos += (eos.empty() ? "" : ",") + std::to_string(e);
  // Labelled when generation_config.json's ids are the ones used (they differ from config.json's).
  const bool gen_cfg = model_has_eos && !std::equal(eos_ids->begin(), eos_ids->end(), c.eos_token_ids.begin(), c.eos_token_ids.end());
  const char* eos_source = gen_cfg ? " (generation_config.json)" : !model_has_eos && !eos_ids->empty() ? " (the tokenizer's)" : "";
  auto id_str = [](const std::optional<std::int64_t>& id) { return id ? std::to_string(*id) : std::string("-"); };
  if (!tok) {
    fmt::print("tokenizer        no tokenizer.json (token ids only, < {}; logits width {}; run, perplexity, tokenize and mamba-server take one with --tokenizer)\n",
               std::min(c.vocab_size, c.padded_vocab_size()), c.padded_vocab_size());
    fmt::print("eos              {}{}\n", eos.empty() ? "-" : eos, eos_source);
    return;
  }
  const std::int64_t ids = std::min(c.vocab_size, c.padded_vocab_size());
  if (tok->size() > ids) {
    fmt::print("tokenizer        {} ids: MORE than the model's vocabulary of {} (ids ≥ {} are refused in prompts)\n", tok->size(), ids, ids);
  } else {
    fmt::print("tokenizer        {} ids{}\n", tok->size(),
               tok->size() < c.padded_vocab_size() ? fmt::format(" (logits rows {}–{} are padding)", tok->size(), c.padded_vocab_size() - 1) : "");
  }
  std::string specials;
  for (const auto& a : tok->added_tokens())
    if (a.special) specials += fmt::format("{}{}={}", specials.empty() ? "" : ", ", a.id, a.content);
  fmt::print("special tokens   {}\n", specials.empty() ? "(none)" : specials);
  fmt::print("bos / eos / pad  {} / {}{} / {}\n", id_str(c.bos_token_id), eos.empty() ? "-" : eos, eos_source,
             id_str(c.pad_token_id));
}

const CommandRegistrar kInspect("inspect", 20, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "Print a model's architecture, sizes, dtypes, parameter count, state size and tokenizer");
  auto model = std::make_shared<std::string>();
  cmd->add_option("MODEL", *model, "model directory or HF repo id ORG/NAME[@REV] in the local HF cache (default: $MAMBA_MODEL, else the embedded model)")
      ->check(non_empty("a model directory or HF repo id ORG/NAME (leave MODEL out for the default model)"));
  cmd->allow_extras();  // a second word is refused with the usage below (CLI11 said only "not expected")
  cmd->callback([model, cmd] {
    refuse_extra_arguments(*cmd, "inspect takes one MODEL (a directory or ORG/NAME[@REV])");
    run_inspect(*model);
  });
});

}  // namespace
}  // namespace mamba::cli
