// ModelConfig from HF config.json (mamba / falcon_mamba / mamba2) or state-spaces config.json.
//
// Defaults of absent keys are those of each format's reference code:
//   HF transformers MambaConfig / FalconMambaConfig: state_size 16, expand 2, conv_kernel 4,
//     intermediate_size = int(expand·hidden_size), time_step_rank "auto" = ceil(hidden_size/16),
//     use_conv_bias true, use_bias false, layer_norm_epsilon 1e-5, tie_word_embeddings true,
//     residual_in_fp32 true; FalconMamba mixer_rms_eps 1e-6.
//   HF Mamba2Config: num_heads 128, head_dim 64, state_size 128, expand 2, conv_kernel 4, n_groups 8,
//     use_bias false, use_conv_bias true, chunk_size 256, time_step_limit (0, inf), rms_norm true,
//     layer_norm_epsilon 1e-5, tie_word_embeddings false.
//   state-spaces MambaConfig: pad_vocab_size_multiple 8, tie_embeddings true, rms_norm true,
//     residual_in_fp32 true, d_intermediate 0, norm_epsilon 1e-5; Mamba (ssm_cfg): d_state 16,
//     d_conv 4, expand 2, dt_rank "auto", conv_bias true, bias false; Mamba2: d_state 128, d_conv 4,
//     expand 2, headdim 64, ngroups 1, chunk_size 256, norm_before_gate false, dt_limit (0, inf).
#include "mamba/config.h"

#include <cmath>
#include <limits>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/json_lenient.h"
#include "io/mapped_file.h"

namespace mamba {

using nlohmann::json;

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::kMamba1: return "mamba";
    case Arch::kFalconMamba: return "falcon_mamba";
    case Arch::kMamba2: return "mamba2";
  }
  return "?";
}

std::int64_t ModelConfig::padded_vocab_size() const {
  std::int64_t m = pad_vocab_size_multiple > 0 ? pad_vocab_size_multiple : 1;
  return (vocab_size + m - 1) / m * m;
}
std::int64_t ModelConfig::conv_channels() const {
  return arch == Arch::kMamba2 ? d_inner + 2 * n_groups * d_state : d_inner;
}
std::int64_t ModelConfig::prompt_granule() const {
  return arch == Arch::kMamba2 ? std::max<std::int64_t>(chunk_size, 1) : 1;
}
std::int64_t ModelConfig::prompt_piece(std::int64_t position, std::int64_t remaining, std::int64_t target) const {
  const std::int64_t g = prompt_granule(), piece = (std::max<std::int64_t>(target, 1) + g - 1) / g * g;
  return std::min(remaining, piece - position % piece);
}
std::int64_t ModelConfig::in_proj_rows() const {
  return arch == Arch::kMamba2 ? 2 * d_mlp + 2 * d_inner + 2 * n_groups * d_state + n_heads : 2 * d_inner;
}
std::int64_t ModelConfig::conv_state_elems() const { return conv_channels() * (d_conv - 1); }
std::int64_t ModelConfig::ssm_state_elems() const {
  return arch == Arch::kMamba2 ? n_heads * head_dim * d_state : d_inner * d_state;
}
std::int64_t ModelConfig::state_bytes() const {
  return n_layer * (conv_state_elems() + ssm_state_elems()) * static_cast<std::int64_t>(sizeof(float));
}

namespace {

// Upper bound on any single size field: keeps every derived product far from int64 overflow.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;

struct Reader {
  const json& obj;
  std::string source;  // "<path>" or "<path>: ssm_cfg"

  std::string where(const char* key) const { return fmt::format("{}: \"{}\"", source, key); }

  Result<std::int64_t> int_req(const char* key, const char* alias = nullptr) const {
    auto it = obj.find(key);
    if (it == obj.end() && alias != nullptr) it = obj.find(alias);
    if (it == obj.end()) {
      return make_error(ErrorCode::kNotFound,
                        alias ? fmt::format("{}: required key \"{}\" (or \"{}\") is missing", source, key, alias)
                              : fmt::format("{}: required key \"{}\" is missing", source, key));
    }
    return to_int(*it, it.key().c_str());
  }
  Result<std::int64_t> int_or(const char* key, std::int64_t def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    return to_int(*it, key);
  }
  Result<std::int64_t> to_int(const json& v, const char* key) const {
    if (v.is_number_integer()) {
      std::int64_t x = v.get<std::int64_t>();
      if (x < 0 || x > kMaxDim) {
        return make_error(ErrorCode::kInvalidArgument, fmt::format("{} = {}: expected a non-negative integer ≤ {}", where(key), x, kMaxDim));
      }
      return x;
    }
    if (v.is_number_float()) {
      double d = v.get<double>();
      if (d == std::floor(d) && d >= 0 && d <= static_cast<double>(kMaxDim)) return static_cast<std::int64_t>(d);
    }
    return make_error(ErrorCode::kFormat, fmt::format("{}: expected a non-negative integer, got {}", where(key), v.dump()));
  }
  Result<bool> bool_or(const char* key, bool def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    if (!it->is_boolean()) return make_error(ErrorCode::kFormat, fmt::format("{}: expected true/false, got {}", where(key), it->dump()));
    return it->get<bool>();
  }
  Result<double> double_or(const char* key, double def) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return def;
    return io::json_to_double(*it, where(key));
  }
  // `expand`: a positive number, fractional allowed (HF and mamba_ssm's Mamba take int(expand · d_model)).
  Result<double> expand_or(const char* key, double def) const {
    MAMBA_ASSIGN_OR_RETURN(double e, double_or(key, def));
    if (!(e > 0) || e > static_cast<double>(kMaxDim)) {
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{} = {}: expected a positive number ≤ {}", where(key), e, kMaxDim));
    }
    return e;
  }
  // "auto" or integer; "auto" (or absent) → ceil(d_model / 16).
  Result<std::int64_t> rank_or_auto(const char* key, std::int64_t d_model) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null() || (it->is_string() && it->get<std::string>() == "auto")) return (d_model + 15) / 16;
    return to_int(*it, key);
  }
  // The block's activation, when the config names one: SiLU (also called swish) is the only one the
  // Mamba blocks use; another value would silently compute a different model.
  Status silu_or_absent(const char* key) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return {};
    if (it->is_string() && (it->get<std::string>() == "silu" || it->get<std::string>() == "swish")) return {};
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{} = {}: not supported (expected \"silu\" or \"swish\", the Mamba block's activation)", where(key), it->dump()));
  }
  // A [min, max] pair of floats.
  Status limit_pair(const char* key, double* lo, double* hi) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return {};
    if (!it->is_array() || it->size() != 2) {
      return make_error(ErrorCode::kFormat, fmt::format("{}: expected [min, max], got {}", where(key), it->dump()));
    }
    MAMBA_ASSIGN_OR_RETURN(*lo, io::json_to_double((*it)[0], where(key) + "[0]"));
    MAMBA_ASSIGN_OR_RETURN(*hi, io::json_to_double((*it)[1], where(key) + "[1]"));
    return {};
  }
};

Status read_token_ids(const json& j, ModelConfig& c, const std::string& source) {
  auto opt_id = [&](const char* key, std::optional<std::int64_t>& out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return {};
    if (!it->is_number_integer()) return make_error(ErrorCode::kFormat, fmt::format("{}: \"{}\": expected an integer, got {}", source, key, it->dump()));
    out = it->get<std::int64_t>();
    return {};
  };
  MAMBA_RETURN_IF_ERROR(opt_id("bos_token_id", c.bos_token_id));
  MAMBA_RETURN_IF_ERROR(opt_id("pad_token_id", c.pad_token_id));
  auto it = j.find("eos_token_id");
  if (it != j.end() && !it->is_null()) {
    if (it->is_number_integer()) {
      c.eos_token_ids.push_back(it->get<std::int64_t>());
    } else if (it->is_array()) {
      for (const auto& e : *it) {
        if (!e.is_number_integer()) return make_error(ErrorCode::kFormat, fmt::format("{}: \"eos_token_id\": expected integers, got {}", source, it->dump()));
        c.eos_token_ids.push_back(e.get<std::int64_t>());
      }
    } else {
      return make_error(ErrorCode::kFormat, fmt::format("{}: \"eos_token_id\": expected an integer or a list, got {}", source, it->dump()));
    }
  }
  return {};
}

Status parse_hf(const json& j, const std::string& source, const std::string& model_type, ModelConfig& c) {
  Reader r{j, source};
  c.format = CheckpointFormat::kHF;
  if (model_type == "mamba") c.arch = Arch::kMamba1;
  else if (model_type == "falcon_mamba") c.arch = Arch::kFalconMamba;
  else if (model_type == "mamba2") c.arch = Arch::kMamba2;
  else {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: model_type \"{}\" is not supported (expected mamba, falcon_mamba or mamba2)", source, model_type));
  }
  const bool m2 = c.arch == Arch::kMamba2;
  MAMBA_ASSIGN_OR_RETURN(c.d_model, r.int_req("hidden_size", "d_model"));
  MAMBA_ASSIGN_OR_RETURN(c.n_layer, r.int_req("num_hidden_layers", "n_layer"));
  MAMBA_ASSIGN_OR_RETURN(c.vocab_size, r.int_req("vocab_size"));
  c.pad_vocab_size_multiple = 1;
  MAMBA_ASSIGN_OR_RETURN(c.d_state, r.int_or("state_size", m2 ? 128 : 16));
  MAMBA_ASSIGN_OR_RETURN(c.d_conv, r.int_or("conv_kernel", 4));
  MAMBA_ASSIGN_OR_RETURN(c.expand, r.expand_or("expand", 2));
  MAMBA_ASSIGN_OR_RETURN(c.conv_bias, r.bool_or("use_conv_bias", true));
  MAMBA_ASSIGN_OR_RETURN(c.proj_bias, r.bool_or("use_bias", false));
  MAMBA_ASSIGN_OR_RETURN(c.tie_embeddings, r.bool_or("tie_word_embeddings", !m2));
  MAMBA_ASSIGN_OR_RETURN(c.residual_in_fp32, r.bool_or("residual_in_fp32", true));
  MAMBA_ASSIGN_OR_RETURN(c.norm_eps, r.double_or("layer_norm_epsilon", 1e-5));
  MAMBA_RETURN_IF_ERROR(r.silu_or_absent("hidden_act"));
  if (m2) {
    MAMBA_ASSIGN_OR_RETURN(c.rms_norm, r.bool_or("rms_norm", true));
    c.d_inner = c.expand_width();  // Mamba2Mixer: intermediate_size = int(expand · hidden_size)
    MAMBA_ASSIGN_OR_RETURN(c.head_dim, r.int_or("head_dim", 64));
    MAMBA_ASSIGN_OR_RETURN(c.n_heads, r.int_or("num_heads", 128));
    MAMBA_ASSIGN_OR_RETURN(c.n_groups, r.int_or("n_groups", 8));
    MAMBA_ASSIGN_OR_RETURN(c.chunk_size, r.int_or("chunk_size", 256));
    MAMBA_RETURN_IF_ERROR(r.limit_pair("time_step_limit", &c.time_step_min_limit, &c.time_step_max_limit));
    c.dt_rank = 0;
  } else {
    MAMBA_ASSIGN_OR_RETURN(c.d_inner, r.int_or("intermediate_size", c.expand_width()));
    MAMBA_ASSIGN_OR_RETURN(c.dt_rank, r.rank_or_auto("time_step_rank", c.d_model));
    if (c.arch == Arch::kFalconMamba) {
      MAMBA_ASSIGN_OR_RETURN(c.mixer_rms_eps, r.double_or("mixer_rms_eps", 1e-6));
    }
  }
  return read_token_ids(j, c, source);
}

Status parse_state_spaces(const json& j, const std::string& source, ModelConfig& c) {
  Reader r{j, source};
  c.format = CheckpointFormat::kStateSpaces;
  MAMBA_ASSIGN_OR_RETURN(c.d_model, r.int_req("d_model"));
  MAMBA_ASSIGN_OR_RETURN(c.n_layer, r.int_req("n_layer"));
  MAMBA_ASSIGN_OR_RETURN(c.vocab_size, r.int_req("vocab_size"));
  MAMBA_ASSIGN_OR_RETURN(c.pad_vocab_size_multiple, r.int_or("pad_vocab_size_multiple", 8));
  if (c.pad_vocab_size_multiple < 1) c.pad_vocab_size_multiple = 1;
  MAMBA_ASSIGN_OR_RETURN(c.tie_embeddings, r.bool_or("tie_embeddings", true));
  MAMBA_ASSIGN_OR_RETURN(c.rms_norm, r.bool_or("rms_norm", true));
  MAMBA_ASSIGN_OR_RETURN(c.residual_in_fp32, r.bool_or("residual_in_fp32", true));
  MAMBA_ASSIGN_OR_RETURN(c.norm_eps, r.double_or("norm_epsilon", 1e-5));
  MAMBA_ASSIGN_OR_RETURN(std::int64_t d_intermediate, r.int_or("d_intermediate", 0));
  if (d_intermediate != 0) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: \"d_intermediate\" = {}: blocks with an MLP after the mixer are not supported (expected 0)", source, d_intermediate));
  }
  if (auto it = j.find("attn_layer_idx"); it != j.end() && !it->is_null() && !(it->is_array() && it->empty())) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: \"attn_layer_idx\" = {}: hybrid attention layers are not supported", source, it->dump()));
  }
  static const json kEmpty = json::object();
  const json* ssm = &kEmpty;
  if (auto it = j.find("ssm_cfg"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return make_error(ErrorCode::kFormat, fmt::format("{}: \"ssm_cfg\" must be an object, got {}", source, it->dump()));
    ssm = &*it;
  }
  Reader s{*ssm, source + ": ssm_cfg"};
  std::string layer = "Mamba1";
  if (auto it = ssm->find("layer"); it != ssm->end()) {
    if (!it->is_string()) return make_error(ErrorCode::kFormat, fmt::format("{}: ssm_cfg.layer must be a string, got {}", source, it->dump()));
    layer = it->get<std::string>();
  }
  if (layer == "Mamba1") c.arch = Arch::kMamba1;
  else if (layer == "Mamba2") c.arch = Arch::kMamba2;
  else {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: ssm_cfg.layer \"{}\" is not supported (expected Mamba1 or Mamba2)", source, layer));
  }
  const bool m2 = c.arch == Arch::kMamba2;
  MAMBA_ASSIGN_OR_RETURN(c.d_state, s.int_or("d_state", m2 ? 128 : 16));
  MAMBA_ASSIGN_OR_RETURN(c.d_conv, s.int_or("d_conv", 4));
  MAMBA_ASSIGN_OR_RETURN(c.expand, s.expand_or("expand", 2));
  MAMBA_ASSIGN_OR_RETURN(c.conv_bias, s.bool_or("conv_bias", true));
  MAMBA_ASSIGN_OR_RETURN(c.proj_bias, s.bool_or("bias", false));
  MAMBA_RETURN_IF_ERROR(s.silu_or_absent("activation"));
  const std::int64_t d_total = c.expand_width();
  if (m2) {
    MAMBA_ASSIGN_OR_RETURN(bool d_has_hdim, s.bool_or("D_has_hdim", false));
    if (d_has_hdim) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: ssm_cfg.D_has_hdim = true (a skip weight D per channel) is not supported (only one per head)", source));
    }
    MAMBA_ASSIGN_OR_RETURN(c.head_dim, s.int_or("headdim", 64));
    MAMBA_ASSIGN_OR_RETURN(c.n_groups, s.int_or("ngroups", 1));
    MAMBA_ASSIGN_OR_RETURN(c.chunk_size, s.int_or("chunk_size", 256));
    MAMBA_ASSIGN_OR_RETURN(c.norm_before_gate, s.bool_or("norm_before_gate", false));
    MAMBA_ASSIGN_OR_RETURN(bool gated_rmsnorm, s.bool_or("rmsnorm", true));
    if (!gated_rmsnorm) {
      return make_error(ErrorCode::kUnsupported, fmt::format("{}: ssm_cfg.rmsnorm = false (Mamba-2 without the gated RMSNorm) is not supported", source));
    }
    // d_ssm: the SSM part of d_inner; the rest (d_inner − d_ssm) is the gated-MLP prefix (d_mlp).
    MAMBA_ASSIGN_OR_RETURN(std::int64_t d_ssm, s.int_or("d_ssm", d_total));
    if (d_ssm > d_total) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: ssm_cfg.d_ssm = {} exceeds expand·d_model = {}", source, d_ssm, d_total));
    }
    c.d_inner = d_ssm;
    c.d_mlp = d_total - d_ssm;
    c.n_heads = c.head_dim > 0 ? c.d_inner / c.head_dim : 0;
    MAMBA_RETURN_IF_ERROR(s.limit_pair("dt_limit", &c.time_step_min_limit, &c.time_step_max_limit));
    c.dt_rank = 0;
  } else {
    c.d_inner = d_total;
    MAMBA_ASSIGN_OR_RETURN(c.dt_rank, s.rank_or_auto("dt_rank", c.d_model));
  }
  return read_token_ids(j, c, source);
}

// "quantization_config" (absent or null: plain weights). Only mamba.cpp's own q8/q4 layout loads;
// other methods (bitsandbytes, GPTQ, ...) are refused by name.
Status parse_quantization(const json& j, const std::string& source, ModelConfig& c) {
  auto it = j.find("quantization_config");
  if (it == j.end() || it->is_null()) return {};
  auto bad = [&](const std::string& what) {
    return Status(make_error(ErrorCode::kFormat, fmt::format("{}: quantization_config: {}", source, what)));
  };
  if (!it->is_object()) return bad(fmt::format("expected an object, got {}", it->dump()));
  auto method = it->find("quant_method");
  if (method == it->end() || !method->is_string()) return bad("missing string \"quant_method\" (expected \"mamba.cpp\")");
  if (method->get<std::string>() != "mamba.cpp") {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: quantization_config.quant_method \"{}\" is not supported (only \"mamba.cpp\" q8/q4 checkpoints "
                                  "written by `mamba-cli quantize`)", source, method->get<std::string>()));
  }
  auto type = it->find("type");
  if (type == it->end() || !type->is_string() || (*type != "q8" && *type != "q4")) {
    return bad(fmt::format("\"type\" must be \"q8\" or \"q4\", got {}", type == it->end() ? "nothing" : type->dump()));
  }
  auto gs = it->find("group_size");
  if (gs == it->end() || !gs->is_number_integer() || gs->get<std::int64_t>() != 32) {
    return bad(fmt::format("\"group_size\" must be 32, got {}", gs == it->end() ? "nothing" : gs->dump()));
  }
  c.quant_type = type->get<std::string>();
  c.quant_group_size = 32;
  return {};
}

}  // namespace

Status ModelConfig::validate(const std::string& source) const {
  const ModelConfig& c = *this;
  auto positive = [&](const char* name, std::int64_t v) -> Status {
    if (v <= 0) return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {} = {}: must be positive", source, name, v));
    if (v > kMaxDim) return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: {} = {}: exceeds the limit {}", source, name, v, kMaxDim));
    return {};
  };
  MAMBA_RETURN_IF_ERROR(positive("d_model", c.d_model));
  MAMBA_RETURN_IF_ERROR(positive("n_layer", c.n_layer));
  MAMBA_RETURN_IF_ERROR(positive("vocab_size", c.vocab_size));
  MAMBA_RETURN_IF_ERROR(positive("d_state", c.d_state));
  MAMBA_RETURN_IF_ERROR(positive("d_conv", c.d_conv));
  MAMBA_RETURN_IF_ERROR(positive("d_inner", c.d_inner));
  if (c.n_layer > 4096) return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: n_layer = {}: exceeds the limit 4096", source, c.n_layer));
  const bool hf = c.format == CheckpointFormat::kHF;
  // Eps values and limits are used as float32: they must be positive / finite there, not only as
  // the double parsed (1e300 is finite as double, +inf as float; 1e-50 is 0 as float).
  auto positive_f32 = [&](const char* name, double v) -> Status {
    const auto f = static_cast<float>(v);
    if (f > 0 && std::isfinite(f)) return {};
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: {} = {}: must be positive and finite as float32 (between {} and {})", source, name, v,
                                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()));
  };
  MAMBA_RETURN_IF_ERROR(positive_f32(hf ? "layer_norm_epsilon" : "norm_epsilon", c.norm_eps));
  // eos ids end generation: one outside the vocabulary could never be produced.
  for (std::int64_t id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: eos_token_id = {}: expected a token id in [0, vocab_size = {})", source, id, c.vocab_size));
    }
  }
  if (c.arch == Arch::kMamba2) {
    MAMBA_RETURN_IF_ERROR(positive("head_dim", c.head_dim));
    MAMBA_RETURN_IF_ERROR(positive("n_heads", c.n_heads));
    MAMBA_RETURN_IF_ERROR(positive("n_groups", c.n_groups));
    MAMBA_RETURN_IF_ERROR(positive("chunk_size", c.chunk_size));
    // Prompts run in pieces of whole chunks (≥ 512 tokens), so the chunk bounds a piece's activations;
    // no tensor's shape depends on it. Checkpoints use 256 (mamba_ssm's and HF's default): a config
    // of 16777216 with the embedded model's tensors made `perplexity` on 600 KB of text take 7.2 GB
    // (one piece of the whole text; 99 MB at 64), and mamba-server's prefill budget that large.
    constexpr std::int64_t kMaxChunkSize = 4096;
    if (c.chunk_size > kMaxChunkSize) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: chunk_size = {}: exceeds the limit {} (checkpoints use 256)", source, c.chunk_size, kMaxChunkSize));
    }
    if (!hf && c.d_inner % c.head_dim != 0) {  // state-spaces: n_heads is derived, d_inner / headdim
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: ssm_cfg.headdim = {} does not divide d_inner = {} (the SSM's width: expand · d_model, or d_ssm)",
                                    source, c.head_dim, c.d_inner));
    }
    if (c.n_heads * c.head_dim != c.d_inner) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: n_heads ({}) · head_dim ({}) = {} must equal d_inner = {} (expand {} · hidden_size {}): "
                                    "one of num_heads, head_dim, expand and hidden_size is wrong",
                                    source, c.n_heads, c.head_dim, c.n_heads * c.head_dim, c.d_inner, c.expand, c.d_model));
    }
    if (c.n_heads % c.n_groups != 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: n_heads ({}) must be a multiple of n_groups ({})", source, c.n_heads, c.n_groups));
    }
    if (c.norm_before_gate) {
      return make_error(ErrorCode::kUnsupported, fmt::format("{}: norm_before_gate = true is not supported (only false)", source));
    }
    if (std::isnan(c.time_step_min_limit) || std::isnan(c.time_step_max_limit) || c.time_step_min_limit < 0 ||
        c.time_step_max_limit < c.time_step_min_limit) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: time_step_limit [{}, {}]: expected 0 ≤ min ≤ max", source, c.time_step_min_limit, c.time_step_max_limit));
    }
    // The max may be +inf (no clamp; a double above FLT_MAX means the same); the min is a float32 clamp.
    if (!std::isfinite(static_cast<float>(c.time_step_min_limit))) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: {}[0] = {}: must be finite as float32 (at most {})", source, hf ? "time_step_limit" : "dt_limit",
                                    c.time_step_min_limit, std::numeric_limits<float>::max()));
    }
  } else {
    MAMBA_RETURN_IF_ERROR(positive("dt_rank", c.dt_rank));
    if (c.arch == Arch::kFalconMamba) MAMBA_RETURN_IF_ERROR(positive_f32("mixer_rms_eps", c.mixer_rms_eps));
  }
  // Derived sizes (computed later with plain int64 arithmetic) must stay far from overflow: every
  // per-layer tensor and the whole state below 2^48 elements / bytes.
  constexpr std::int64_t kMaxDerived = std::int64_t{1} << 48;
  std::int64_t gn = 0, conv = 0, rows = 0, conv_state = 0, ssm = 0, per_layer = 0, total = 0, emb = 0;
  bool ok = !__builtin_mul_overflow(c.n_groups, c.d_state, &gn) && !__builtin_mul_overflow(gn, std::int64_t{2}, &gn) &&
            !__builtin_add_overflow(c.d_inner, c.arch == Arch::kMamba2 ? gn : 0, &conv) &&
            !__builtin_add_overflow(2 * c.d_inner + 2 * c.d_mlp, c.arch == Arch::kMamba2 ? gn + c.n_heads : 0, &rows) &&
            !__builtin_mul_overflow(conv, c.d_conv - 1, &conv_state) &&
            !__builtin_mul_overflow(c.arch == Arch::kMamba2 ? c.n_heads * c.head_dim : c.d_inner, c.d_state, &ssm) &&
            !__builtin_add_overflow(conv_state, ssm, &per_layer) && !__builtin_mul_overflow(per_layer, c.n_layer * 4, &total) &&
            !__builtin_mul_overflow(c.padded_vocab_size(), c.d_model, &emb) && conv <= kMaxDerived && rows <= kMaxDerived &&
            total <= kMaxDerived && emb <= kMaxDerived && rows * c.d_model <= kMaxDerived;
  if (!ok) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: sizes too large (d_model {}, d_inner {}, d_state {}, n_groups {}, n_layer {}, vocab {}): a tensor or the "
                                  "per-sequence state would exceed 2^48 elements",
                                  source, c.d_model, c.d_inner, c.d_state, c.n_groups, c.n_layer, c.vocab_size));
  }
  return {};
}

Result<ModelConfig> ModelConfig::from_json_text(const std::string& text, const std::string& source) {
  MAMBA_ASSIGN_OR_RETURN(json j, io::parse_json_lenient(text, source));
  if (!j.is_object()) return make_error(ErrorCode::kFormat, fmt::format("{}: expected a JSON object at top level", source));
  ModelConfig c;
  auto mt = j.find("model_type");
  if (mt != j.end() && !mt->is_null()) {
    if (!mt->is_string()) return make_error(ErrorCode::kFormat, fmt::format("{}: \"model_type\" must be a string, got {}", source, mt->dump()));
    MAMBA_RETURN_IF_ERROR(parse_hf(j, source, mt->get<std::string>(), c));
  } else if (j.contains("d_model") || j.contains("ssm_cfg") || j.contains("n_layer")) {
    MAMBA_RETURN_IF_ERROR(parse_state_spaces(j, source, c));
  } else if (j.contains("hidden_size")) {
    return make_error(ErrorCode::kNotFound, fmt::format("{}: required key \"model_type\" is missing (expected mamba, falcon_mamba or mamba2)", source));
  } else {
    return make_error(ErrorCode::kNotFound,
                      fmt::format("{}: neither an HF config (\"model_type\" + \"hidden_size\") nor a state-spaces config (\"d_model\"): required key \"d_model\" / \"hidden_size\" is missing",
                                  source));
  }
  MAMBA_RETURN_IF_ERROR(parse_quantization(j, source, c));
  MAMBA_RETURN_IF_ERROR(c.validate(source));
  return c;
}

Result<ModelConfig> ModelConfig::from_file(const std::string& path) {
  MAMBA_ASSIGN_OR_RETURN(std::string text, io::read_text_file(path));
  return from_json_text(text, path);
}

}  // namespace mamba
