// ModelConfig: one architecture description filled from either checkpoint format.
//
// Sources: HF transformers' MambaConfig / FalconMambaConfig / Mamba2Config (defaults of absent
// keys), state-spaces/mamba `MambaConfig` + `Mamba` / `Mamba2` module defaults for the original
// format. Keys with no default in the format's reference code (d_model / hidden_size,
// n_layer / num_hidden_layers, vocab_size) are required: their absence is an error naming the key.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "mamba/status.h"

namespace mamba {

enum class Arch : std::uint8_t {
  kMamba1,       ///< Gu & Dao 2023 (HF model_type "mamba"; state-spaces default layer)
  kFalconMamba,  ///< Mamba-1 + weightless RMS norms on dt, B, C (HF model_type "falcon_mamba")
  kMamba2,       ///< Dao & Gu 2024 SSD (HF "mamba2"; state-spaces ssm_cfg.layer = "Mamba2")
};
/// HF's model_type of `a`: "mamba", "falcon_mamba" or "mamba2" (a static string).
const char* arch_name(Arch a);

enum class CheckpointFormat : std::uint8_t {
  kHF,           ///< config.json with model_type + safetensors (single or sharded)
  kStateSpaces,  ///< config.json with d_model/n_layer/ssm_cfg + pytorch_model.bin (or safetensors)
};

/// Architecture hyper-parameters, raw and derived. All sizes are element counts.
struct ModelConfig {
  Arch arch = Arch::kMamba1;
  CheckpointFormat format = CheckpointFormat::kHF;

  std::int64_t d_model = 0;     ///< hidden size (d in the paper)
  std::int64_t n_layer = 0;
  std::int64_t vocab_size = 0;  ///< as written in config.json (state-spaces: unpadded)
  std::int64_t pad_vocab_size_multiple = 1;  ///< state-spaces only (HF: 1, vocab already padded)
  std::int64_t d_state = 16;    ///< N
  std::int64_t d_conv = 4;      ///< K (conv kernel width)
  double expand = 2;            ///< d_inner / d_model as config.json gives it; may be fractional (1.5)
  std::int64_t d_inner = 0;     ///< E = ⌊expand · d_model⌋ unless given (HF intermediate_size), as HF's
                                ///< int(expand * hidden_size) and mamba_ssm's Mamba int(expand * d_model)
  std::int64_t dt_rank = 0;     ///< R; "auto" = ceil(d_model / 16)  (Mamba-1 only)
  bool conv_bias = true;        ///< conv1d has a bias
  bool proj_bias = false;       ///< in_proj / out_proj have biases (HF use_bias)
  bool tie_embeddings = true;   ///< lm_head = embedding
  bool residual_in_fp32 = true;  ///< as the config says; informational: the residual stream here is always fp32
                                 ///< (with false HF keeps it in the model dtype: a bf16 model then rounds it)
  bool rms_norm = true;         ///< false = LayerNorm (refused by the loader with a clear error)
  double norm_eps = 1e-5;       ///< block + final norm eps (HF layer_norm_epsilon)
  double mixer_rms_eps = 1e-6;  ///< Falcon-Mamba's weightless dt/B/C norms

  // Mamba-2 only
  std::int64_t head_dim = 64;   ///< P
  std::int64_t n_heads = 0;     ///< H = d_inner / head_dim
  std::int64_t n_groups = 1;    ///< G (B and C are shared by H/G heads)
  std::int64_t chunk_size = 256;///< SSD chunk length Q
  std::int64_t d_mlp = 0;       ///< width of the optional gated-MLP prefix of in_proj (state-spaces: expand·d_model − ssm_cfg.d_ssm; bind_weights re-derives it from in_proj's rows); 0 = none
  bool norm_before_gate = false;///< state-spaces RMSNormGated flag (only false is supported)
  double time_step_min_limit = 0.0;  ///< clamp of dt after softplus (time_step_limit[0])
  double time_step_max_limit = std::numeric_limits<double>::infinity();  ///< (time_step_limit[1]); +inf = no upper clamp

  // Weight quantization (config.json "quantization_config", written by `mamba-cli quantize`):
  // {"quant_method": "mamba.cpp", "type": "q8" | "q4", "group_size": 32}. Empty quant_type = the
  // checkpoint holds plain F32/BF16/F16 weights. Layout: README §"Quantized weights".
  std::string quant_type;            ///< "", "q8" or "q4"
  std::int64_t quant_group_size = 0; ///< weights per scale along K (32) when quant_type is set

  /// ⌊expand · d_model⌋, Python's int(expand * d_model) as HF's mixers and mamba_ssm's Mamba compute
  /// it: d_inner unless config.json gives intermediate_size (HF Mamba-1) or ssm_cfg.d_ssm (state-spaces
  /// Mamba-2, whose gated-MLP prefix takes the rest).
  std::int64_t expand_width() const { return static_cast<std::int64_t>(expand * static_cast<double>(d_model)); }

  // token ids from config.json (generation_config.json may override eos at generation time)
  std::optional<std::int64_t> bos_token_id, pad_token_id;
  std::vector<std::int64_t> eos_token_ids;

  // ---- derived sizes ----
  /// Rows of the embedding / lm_head = logits width: vocab_size rounded up to pad_vocab_size_multiple.
  std::int64_t padded_vocab_size() const;
  /// Channels of the depthwise conv: Mamba-1 d_inner; Mamba-2 d_inner + 2·n_groups·d_state.
  std::int64_t conv_channels() const;
  /// Tokens a prompt split must be a multiple of (at absolute positions) for the pieces to give
  /// bitwise the unsplit prefill: chunk_size (≥ 1) for Mamba-2, whose SSD chunks are aligned;
  /// 1 for Mamba-1 / Falcon-Mamba, whose scan splits anywhere.
  std::int64_t prompt_granule() const;
  /// Length of the next prefill piece of a prompt whose state is at absolute `position` (≥ 0) with
  /// `remaining` (≥ 1) tokens left, for pieces of about `target` tokens: the piece size is `target`
  /// rounded up to prompt_granule(), and each piece ends at an absolute multiple of it (or at the
  /// prompt's end), so the pieces give bitwise the unsplit prefill and a continued state joins the
  /// same grid. Result in [1, remaining]; its size bounds a caller's per-piece logits buffer.
  std::int64_t prompt_piece(std::int64_t position, std::int64_t remaining, std::int64_t target) const;
  /// Rows of in_proj.weight: Mamba-1 2·d_inner; Mamba-2 2·d_mlp + 2·d_inner + 2·n_groups·d_state + n_heads.
  std::int64_t in_proj_rows() const;
  /// Per-layer fp32 conv_state elements: conv_channels · (d_conv − 1).
  std::int64_t conv_state_elems() const;
  /// Per-layer fp32 ssm_state elements: Mamba-1 d_inner·d_state; Mamba-2 n_heads·head_dim·d_state.
  std::int64_t ssm_state_elems() const;
  /// Bytes of one sequence's whole state (all layers, fp32).
  std::int64_t state_bytes() const;

  /// Parses config.json text. `source` (a path) is used in error messages. Accepts Python-json's
  /// bare Infinity / -Infinity / NaN tokens, "Infinity" strings and {"__float__": "Infinity"}.
  /// Errors: kFormat (bad JSON), kNotFound (required key), kInvalidArgument (inconsistent sizes,
  /// e.g. n_heads·head_dim ≠ d_inner), kUnsupported (unknown model_type / layer).
  static Result<ModelConfig> from_json_text(const std::string& text, const std::string& source);
  /// Reads and parses `path` (config.json). Errors: kNotFound / kIo when the file is missing or
  /// unreadable (naming it), then from_json_text's.
  static Result<ModelConfig> from_file(const std::string& path);
  /// The checks from_json_text ends with, for a config built or changed in code: every size
  /// positive and below its limit, Mamba-2's n_heads · head_dim = d_inner with n_groups dividing
  /// n_heads, eps values positive as float32, eos ids inside the vocabulary, derived sizes below
  /// 2^48. Errors: kInvalidArgument naming `source` (a path), the field and its value;
  /// kUnsupported for norm_before_gate = true.
  Status validate(const std::string& source) const;
};

}  // namespace mamba
