// bind_weights: the per-architecture tensor table. One table drives binding and validation of
// presence, dtype (F32/BF16/F16) and shape, for HF and state-spaces names alike.
//
// Names (HF and state-spaces share all but the embedding):
//   backbone.embeddings.weight (HF) | backbone.embedding.weight (state-spaces)   [V, d]
//   backbone.layers.{i}.norm.weight                                              [d]
//   backbone.layers.{i}.mixer.{in_proj,conv1d,out_proj,x_proj,dt_proj}.{weight,bias}, A_log, D,
//   dt_bias, norm.weight (Mamba-2 gated RMSNorm)
//   backbone.norm_f.weight [d];  lm_head.weight [V, d] (untied only)
#include "mamba/weights.h"

#include <fmt/format.h>

#include <charconv>
#include <string_view>

namespace mamba {
namespace {

enum class Need { kRequired, kForbidden };  // forbidden: config says absent but the file has it

/// The config.json fields a tensor's expected shape is computed from, with their values, by the
/// file's own names: a wrong field there (a hidden_size or state_size edited by hand) shows up
/// first as a tensor of the wrong shape, which would not name it.
std::string config_fields_note(const ModelConfig& c) {
  const bool hf = c.format == CheckpointFormat::kHF;
  std::string s = fmt::format("{} {}, expand {}", hf ? "hidden_size" : "d_model", c.d_model, c.expand);
  if (hf && c.d_inner != c.expand_width()) s += fmt::format(", intermediate_size {}", c.d_inner);
  s += fmt::format(" (d_inner {}), {} {}, {} {}", c.d_inner, hf ? "state_size" : "d_state", c.d_state,
                   hf ? "conv_kernel" : "d_conv", c.d_conv);
  if (c.arch == Arch::kMamba2)
    s += fmt::format(", {} {}, {} {}", hf ? "n_groups" : "ngroups", c.n_groups, hf ? "head_dim" : "headdim", c.head_dim);
  else
    s += fmt::format(", {} {}", hf ? "time_step_rank" : "dt_rank", c.dt_rank);
  s += fmt::format(", vocab_size {}", c.vocab_size);
  return fmt::format(" (the expected shape follows config.json: {}; one of these may be wrong)", s);
}

struct Binder {
  const Checkpoint& ckpt;
  std::string dir;

  std::string file_of(const TensorEntry* e) const { return e ? e->file : dir; }

  // `quant_ok`: a 2-D projection / embedding that `mamba-cli quantize` may store as Q8/Q4.
  Status check(const TensorEntry& e, const Shape& want, bool quant_ok) const {
    const DType t = e.view.dtype;
    const bool quant = t == DType::kQ8 || t == DType::kQ4;
    if (quant && !quant_ok) {
      return make_error(ErrorCode::kShape,
                        fmt::format("{}: tensor '{}': dtype {} is not allowed here (only the 2-D projections and the embedding / lm_head "
                                    "are quantized; expected F32, BF16 or F16)", e.file, e.name, dtype_name(t)));
    }
    if (t != DType::kF32 && t != DType::kBF16 && t != DType::kF16 && !quant) {
      return make_error(ErrorCode::kShape,
                        fmt::format("{}: tensor '{}': dtype {} is not supported (expected F32, BF16 or F16{})", e.file, e.name, dtype_name(t),
                                    quant_ok ? ", or Q8/Q4 with a quantization_config" : ""));
    }
    if (e.view.shape != want) {
      return make_error(ErrorCode::kShape,
                        fmt::format("{}: tensor '{}': expected shape {}, got {}{}", e.file, e.name, want.str(), e.view.shape.str(),
                                    config_fields_note(ckpt.config())));
    }
    return {};
  }

  // For a missing "backbone.X": a stored tensor named "P.X" or "X" (another prefix, or none) — the
  // names of a checkpoint saved from another class (e.g. HF's MambaModel, without the LM head).
  std::string other_prefix_hint(const std::string& name) const {
    constexpr std::string_view kBackbone = "backbone.";
    if (name.compare(0, kBackbone.size(), kBackbone) != 0) return {};
    const std::string rest = name.substr(kBackbone.size());
    for (const TensorEntry& t : ckpt.tensors()) {
      if (t.name.size() < rest.size() || t.name.compare(t.name.size() - rest.size(), rest.size(), rest) != 0) continue;
      const std::string prefix = t.name.substr(0, t.name.size() - rest.size());
      if (!prefix.empty() && prefix.back() != '.') continue;
      return fmt::format(" (the file holds '{}': its tensors are named under {} where mamba.cpp reads 'backbone.', as HF "
                         "MambaForCausalLM / Mamba2ForCausalLM and state-spaces MambaLMHeadModel save them)",
                         t.name, prefix.empty() ? std::string("no prefix") : "'" + prefix + "'");
    }
    return {};
  }

  // A required tensor: present with the given shape.
  Result<TensorView> req(const std::string& name, const Shape& want, const char* why = nullptr, bool quant_ok = false) const {
    const TensorEntry* e = ckpt.find(name);
    if (e == nullptr) {
      return make_error(ErrorCode::kNotFound, fmt::format("{}: tensor '{}' (shape {}) is missing{}{}{}", dir, name, want.str(),
                                                          why ? ": " : "", why ? why : "", other_prefix_hint(name)));
    }
    MAMBA_RETURN_IF_ERROR(check(*e, want, quant_ok));
    return e->view;
  }

  // A tensor present iff `present` says so (a config flag); empty view when absent.
  Result<TensorView> opt(const std::string& name, const Shape& want, bool present, const char* flag) const {
    const TensorEntry* e = ckpt.find(name);
    if (present) {
      if (e == nullptr) {
        return make_error(ErrorCode::kNotFound,
                          fmt::format("{}: tensor '{}' (shape {}) is missing but the config says {} = true", dir, name, want.str(), flag));
      }
      MAMBA_RETURN_IF_ERROR(check(*e, want, false));
      return e->view;
    }
    if (e != nullptr) {
      return make_error(ErrorCode::kShape,
                        fmt::format("{}: tensor '{}' is present but the config says {} = false (the model would ignore it)", e->file, name, flag));
    }
    return TensorView{};
  }
};

/// The config key a bias flag has in this checkpoint's own config.json (errors name what the user
/// can find there): HF's use_bias / use_conv_bias, state-spaces' ssm_cfg.bias / ssm_cfg.conv_bias.
const char* bias_key(const ModelConfig& c, bool conv) {
  if (c.format == CheckpointFormat::kStateSpaces) return conv ? "ssm_cfg.conv_bias" : "ssm_cfg.bias";
  return conv ? "use_conv_bias" : "use_bias";
}

Status bind_mamba1_layer(const Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const std::int64_t d = c.d_model, E = c.d_inner, N = c.d_state, K = c.d_conv, R = c.dt_rank;
  MAMBA_ASSIGN_OR_RETURN(L.in_proj, b.req(p + "mixer.in_proj.weight", {2 * E, d}, nullptr, true));
  MAMBA_ASSIGN_OR_RETURN(L.in_proj_bias, b.opt(p + "mixer.in_proj.bias", {2 * E}, c.proj_bias, bias_key(c, false)));
  MAMBA_ASSIGN_OR_RETURN(L.conv1d_weight, b.req(p + "mixer.conv1d.weight", {E, 1, K}));
  MAMBA_ASSIGN_OR_RETURN(L.conv1d_bias, b.opt(p + "mixer.conv1d.bias", {E}, c.conv_bias, bias_key(c, true)));
  MAMBA_ASSIGN_OR_RETURN(L.x_proj, b.req(p + "mixer.x_proj.weight", {R + 2 * N, E}, nullptr, true));
  MAMBA_ASSIGN_OR_RETURN(L.dt_proj, b.req(p + "mixer.dt_proj.weight", {E, R}, nullptr, true));
  MAMBA_ASSIGN_OR_RETURN(L.dt_proj_bias, b.req(p + "mixer.dt_proj.bias", {E}));
  MAMBA_ASSIGN_OR_RETURN(L.A_log, b.req(p + "mixer.A_log", {E, N}));
  MAMBA_ASSIGN_OR_RETURN(L.D, b.req(p + "mixer.D", {E}));
  MAMBA_ASSIGN_OR_RETURN(L.out_proj, b.req(p + "mixer.out_proj.weight", {d, E}, nullptr, true));
  MAMBA_ASSIGN_OR_RETURN(L.out_proj_bias, b.opt(p + "mixer.out_proj.bias", {d}, c.proj_bias, bias_key(c, false)));
  return {};
}

Status bind_mamba2_layer(const Binder& b, const ModelConfig& c, const std::string& p, LayerWeights& L) {
  const std::int64_t d = c.d_model, E = c.d_inner, N = c.d_state, K = c.d_conv, H = c.n_heads, G = c.n_groups;
  const std::int64_t C = c.conv_channels(), M = c.d_mlp;
  MAMBA_ASSIGN_OR_RETURN(L.in_proj, b.req(p + "mixer.in_proj.weight", {2 * M + 2 * E + 2 * G * N + H, d}, nullptr, true));
  MAMBA_ASSIGN_OR_RETURN(L.in_proj_bias, b.opt(p + "mixer.in_proj.bias", {2 * M + 2 * E + 2 * G * N + H}, c.proj_bias, bias_key(c, false)));
  MAMBA_ASSIGN_OR_RETURN(L.conv1d_weight, b.req(p + "mixer.conv1d.weight", {C, 1, K}));
  MAMBA_ASSIGN_OR_RETURN(L.conv1d_bias, b.opt(p + "mixer.conv1d.bias", {C}, c.conv_bias, bias_key(c, true)));
  MAMBA_ASSIGN_OR_RETURN(L.dt_bias, b.req(p + "mixer.dt_bias", {H}));
  MAMBA_ASSIGN_OR_RETURN(L.A_log, b.req(p + "mixer.A_log", {H}));
  MAMBA_ASSIGN_OR_RETURN(L.D, b.req(p + "mixer.D", {H}));
  MAMBA_ASSIGN_OR_RETURN(L.gated_norm, b.req(p + "mixer.norm.weight", {E}));
  MAMBA_ASSIGN_OR_RETURN(L.out_proj, b.req(p + "mixer.out_proj.weight", {d, E + M}, nullptr, true));
  MAMBA_ASSIGN_OR_RETURN(L.out_proj_bias, b.opt(p + "mixer.out_proj.bias", {d}, c.proj_bias, bias_key(c, false)));
  return {};
}

// Mamba-2's in_proj rows = 2·d_mlp + 2·E + 2·G·N + H: the gated-MLP width is what the tensor says.
Status derive_d_mlp(const Checkpoint& ckpt, ModelConfig& c) {
  const std::string name = "backbone.layers.0.mixer.in_proj.weight";
  const TensorEntry* e = ckpt.find(name);
  if (e == nullptr) return {};  // reported as missing by the binder
  const std::int64_t base = 2 * c.d_inner + 2 * c.n_groups * c.d_state + c.n_heads;
  const std::int64_t rows = e->view.shape.rank == 2 ? e->view.shape[0] : -1;
  if (rows < base || (rows - base) % 2 != 0) {
    return make_error(ErrorCode::kShape,
                      fmt::format("{}: tensor '{}': expected shape [2·d_mlp + {} (= 2·d_inner {} + 2·n_groups·d_state {} + n_heads {}), {}], got {}",
                                  e->file, name, base, 2 * c.d_inner, 2 * c.n_groups * c.d_state, c.n_heads, c.d_model, e->view.shape.str()));
  }
  const std::int64_t d_mlp = (rows - base) / 2;
  // A state-spaces config fixes it (expand·d_model − ssm_cfg.d_ssm), as mamba_ssm's Mamba2 builds
  // in_proj and out_proj from it; HF's config has no such field.
  if (c.format == CheckpointFormat::kStateSpaces && d_mlp != c.d_mlp) {
    return make_error(ErrorCode::kShape,
                      fmt::format("{}: tensor '{}': shape {} implies d_mlp {}, but the config gives d_mlp = expand·d_model − "
                                  "ssm_cfg.d_ssm = {} − {} = {} (expand {}, d_model {})",
                                  e->file, name, e->view.shape.str(), d_mlp, c.expand_width(), c.d_inner, c.d_mlp, c.expand, c.d_model));
  }
  c.d_mlp = d_mlp;
  return {};
}

// Tensors of layers ≥ n_layer would be silently ignored: the model run would not be the one the
// checkpoint holds (e.g. num_hidden_layers 11 on a 12-layer checkpoint). The first one is named.
Status check_no_extra_layers(const Checkpoint& ckpt, const ModelConfig& c) {
  constexpr std::string_view kPrefix = "backbone.layers.";
  for (const TensorEntry& e : ckpt.tensors()) {
    if (e.name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    const char* first = e.name.data() + kPrefix.size();
    const char* last = e.name.data() + e.name.size();
    std::int64_t layer = -1;
    auto [p, ec] = std::from_chars(first, last, layer);
    if (ec == std::errc::result_out_of_range || (ec == std::errc() && p < last && *p == '.' && layer >= c.n_layer)) {
      return make_error(ErrorCode::kShape,
                        fmt::format("{}: tensor '{}' belongs to layer {}, but the config says {} = {} (layers 0–{}): the model would "
                                    "ignore the checkpoint's layers from {} on (fix the layer count in config.json)",
                                    e.file, e.name, std::string_view(first, static_cast<std::size_t>(p - first)),
                                    c.format == CheckpointFormat::kHF ? "num_hidden_layers" : "n_layer", c.n_layer, c.n_layer - 1,
                                    c.n_layer));
    }
  }
  return {};
}

}  // namespace

Result<ModelWeights> bind_weights(Checkpoint& ckpt) {
  ModelConfig& c = ckpt.mutable_config();
  if (!c.rms_norm) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}/config.json: rms_norm = false (LayerNorm blocks) is not supported; only RMSNorm models load", ckpt.dir()));
  }
  if (c.arch == Arch::kMamba2) MAMBA_RETURN_IF_ERROR(derive_d_mlp(ckpt, c));
  MAMBA_RETURN_IF_ERROR(check_no_extra_layers(ckpt, c));

  Binder b{ckpt, ckpt.dir()};
  const std::int64_t V = c.padded_vocab_size(), d = c.d_model;
  ModelWeights w;
  // The format decides the embedding's name; accept the other spelling too (converted checkpoints).
  const char* emb_names[2] = {"backbone.embeddings.weight", "backbone.embedding.weight"};
  if (c.format == CheckpointFormat::kStateSpaces) std::swap(emb_names[0], emb_names[1]);
  const char* emb = ckpt.find(emb_names[0]) != nullptr || ckpt.find(emb_names[1]) == nullptr ? emb_names[0] : emb_names[1];
  MAMBA_ASSIGN_OR_RETURN(w.embedding, b.req(emb, {V, d}, nullptr, true));
  MAMBA_ASSIGN_OR_RETURN(w.norm_f, b.req("backbone.norm_f.weight", {d}));
  if (c.tie_embeddings) {
    w.lm_head = w.embedding;
  } else {
    MAMBA_ASSIGN_OR_RETURN(w.lm_head, b.req("lm_head.weight", {V, d}, "the config says the lm_head is untied (tie_word_embeddings / tie_embeddings = false)", true));
  }
  w.layers.resize(static_cast<std::size_t>(c.n_layer));
  for (std::int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = fmt::format("backbone.layers.{}.", i);
    LayerWeights& L = w.layers[static_cast<std::size_t>(i)];
    MAMBA_ASSIGN_OR_RETURN(L.norm, b.req(p + "norm.weight", {d}));
    if (c.arch == Arch::kMamba2) {
      MAMBA_RETURN_IF_ERROR(bind_mamba2_layer(b, c, p, L));
    } else {
      MAMBA_RETURN_IF_ERROR(bind_mamba1_layer(b, c, p, L));
    }
  }
  return w;
}

}  // namespace mamba
