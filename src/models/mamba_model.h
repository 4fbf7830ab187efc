// MambaModel: the one Model implementation (Mamba-1, Falcon-Mamba, Mamba-2). Internal header.
//
// The forward pass (model.cc) is the same for every architecture:
//   embed → per layer: RMSNorm → mixer → residual add (fp32) → final RMSNorm → lm_head.
// The mixers live in mamba1.cc (Mamba-1 / Falcon-Mamba) and mamba2.cc (Mamba-2 SSD).
// A forward call covers T rows of activations that belong to one or more sequences (SeqSlice):
// prefill = one sequence of T tokens; a decode step = B sequences of one token each. Projections
// run over all T rows at once (GEMM); conv and scan run per sequence on its own state.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "mamba/model.h"
#include "mamba/weights.h"
#include "ops/ops.h"

namespace mamba::models {

/// The small per-channel tensors of one layer, converted to fp32 once at load.
struct LayerParams {
  std::vector<float> norm;        ///< [d]  block RMSNorm weight
  std::vector<float> conv_w;      ///< [C, K] depthwise conv weight
  std::vector<float> conv_wT;     ///< [K, C] the same, transposed (ops::conv1d_silu_batch's layout)
  std::vector<float> conv_b;      ///< [C] or empty (no conv bias)
  std::vector<float> A;           ///< Mamba-1 [E, N]; Mamba-2 [H];  A = −exp(A_log)
  std::vector<float> D;           ///< Mamba-1 [E]; Mamba-2 [H]
  std::vector<float> dt_bias;     ///< Mamba-2 [H]
  std::vector<float> gated_norm;  ///< Mamba-2 [E]
};

/// Rows [row0, row0 + len) of a forward call's activations belong to `state`.
struct SeqSlice {
  std::int64_t row0 = 0, len = 0;
  State* state = nullptr;
};

/// Activation buffers reused across calls (they only grow: no allocation per decode step once
/// the largest batch has been seen).
struct Scratch {
  std::vector<float> h, x, mix;   ///< [T, d] residual stream, normed input, mixer output
  std::vector<float> proj;        ///< [T, in_proj rows]
  std::vector<float> conv;        ///< [T, C]
  std::vector<float> xdbl;        ///< Mamba-1 [T, R + 2N]
  std::vector<float> dt;          ///< Mamba-1 [T, E]
  std::vector<float> y;           ///< [T, M + E] (Mamba-2 with d_mlp: [silu(z0)·x0 | y])
  std::vector<ops::Conv1dSeq> conv_seqs;          ///< per-sequence op arguments (reused, no
  std::vector<ops::SelectiveScanArgs> scan_seqs;  ///< allocation per decode step)
  std::vector<ops::SsdArgs> ssd_seqs;
  /// Returns buf's data, grown to at least n floats.
  static float* get(std::vector<float>& buf, std::int64_t n) {
    if (buf.size() < static_cast<std::size_t>(n)) buf.resize(static_cast<std::size_t>(n));
    return buf.data();
  }
};

/// What a mixer needs for one layer.
struct MixerContext {
  const ModelConfig& cfg;
  const LayerWeights& w;   ///< stored-dtype tensors (views into the checkpoint)
  const LayerParams& p;    ///< fp32 small tensors
  std::int64_t layer;      ///< index into State::conv_state / ssm_state
  Scratch& s;
  bool decode = false;     ///< a step() call (one token per sequence): Mamba-1's one-token scan, Mamba-2's recurrent SSD (not chunked)
  bool bf16_tier = false;  ///< the model runs the bf16 tier: Mamba-2's SSD matmuls in bf16 too (ops::SsdArgs::bf16_products)
};

/// Whether this mixer call is a prefill of one sequence over all its T rows: where in_proj's kernel
/// can run the conv (ops::linear_conv_silu, which continues that one sequence's conv_state).
inline bool one_sequence_prefill(const MixerContext& ctx, std::span<const SeqSlice> seqs, std::int64_t T) {
  return !ctx.decode && seqs.size() == 1 && seqs[0].row0 == 0 && seqs[0].len == T;
}

/// Mamba-1 / Falcon-Mamba mixer: x [T, d] (normed) → out [T, d]; updates the slices' states.
void mamba1_mixer(const MixerContext& ctx, const float* x, std::int64_t T, std::span<const SeqSlice> seqs,
                  float* out);
/// Mamba-2 mixer: x [T, d] (normed) → out [T, d]; updates the slices' states (SSD chunks aligned
/// to each slice's state->position).
void mamba2_mixer(const MixerContext& ctx, const float* x, std::int64_t T, std::span<const SeqSlice> seqs,
                  float* out);

/// Packs w's projections (in_proj, x_proj, dt_proj, out_proj, lm_head): quantized ones for the
/// CPU's fastest kernel (ops::pack_weight_to; none below AVX-512 VNNI) — with `precision` kInt8
/// those except lm_head with the int8 tier's sums (ops::pack_weight_int8_to; where
/// pack_weight_int8_bytes is 0 the exact copy; the caller checked ops::int8_tier_available()) —,
/// float ones for the bf16 tier when `precision` is kBF16 (ops::pack_weight_bf16_to; the caller
/// checked ops::bf16_tier_available()),
/// and points their views at the copies, which the returned tensor owns (one allocation for all,
/// empty when nothing is packed; throws std::bad_alloc when out of memory). The embedding view
/// keeps the stored rows for lookups (a tied lm_head gets its own packed copy). With `release_from`
/// (the checkpoint w's views point into), each packed weight's stored pages leave the resident set
/// (Checkpoint::release_pages).
Tensor pack_projections(ModelWeights& w, Precision precision = Precision::kExact, const Checkpoint* release_from = nullptr);

/// Memory auto_precision leaves free beside the bf16 tier's copy: room for the states, scratch
/// buffers and page cache the run allocates next.
inline constexpr std::int64_t kAutoMemoryHeadroom = std::int64_t{512} << 20;
/// auto_precision with its inputs given: whether the bf16 tier can run here, and the bytes of
/// memory available (< 0: unknown, not checked). Dtypes are checked first, so a reason names the
/// checkpoint when no CPU would change the answer. Tested directly (tests/models/auto_precision_test.cc).
/// reserve_bytes: LoadOptions::reserve_bytes, counted beside the copy and the headroom.
AutoPrecision auto_precision_for(const ModelWeights& w, bool tier_available, std::int64_t mem_available,
                                 std::int64_t reserve_bytes = 0);
/// The memory a new allocation can take, in bytes: MemAvailable of /proc/meminfo, capped by what a
/// cgroup limit leaves — v2: /sys/fs/cgroup/memory.max − memory.current; v1:
/// /sys/fs/cgroup/memory/memory.limit_in_bytes − memory.usage_in_bytes — and by what an
/// address-space limit leaves (/proc/self/limits "Max address space" − /proc/self/statm's size ×
/// the page size: ulimit -v); −1 when none is readable.
/// `root` prefixes every path (tests point it at a directory of fake files; "" = this machine).
std::int64_t mem_available_bytes(const std::string& root = "");

class MambaModel final : public Model {
 public:
  /// Validates the config and binds the weights (errors name the tensor/field).
  static Result<std::unique_ptr<Model>> create(Checkpoint ckpt, const LoadOptions& opts);

  const ModelConfig& config() const override { return ckpt_.config(); }
  const Checkpoint& checkpoint() const override { return ckpt_; }
  Precision precision() const override { return precision_; }
  std::string precision_reason() const override { return precision_reason_; }
  std::int64_t logits_width() const override { return weights_.lm_head.shape[0]; }
  State new_state() const override;
  using Model::prefill;  // the sized-buffer overloads
  using Model::step;
  Status prefill(std::span<const std::int32_t> tokens, State& state, LogitsMode mode, float* logits) override;
  Status step(std::span<const std::int32_t> tokens, std::span<State* const> states, float* logits) override;

 private:
  MambaModel(Checkpoint ckpt, ModelWeights weights, std::vector<LayerParams> params);
  /// One forward over T = tokens.size() rows split into `seqs`. Writes logits for rows
  /// [logits_row0, T) into `logits` (none when logits == nullptr). Advances each state's position.
  /// decode: the rows are single decode tokens (step()), so Mamba-2 runs its recurrent SSD.
  /// first_row: the caller's row number of tokens[0] (a prefill piece's start), for error messages.
  /// A scratch buffer that cannot grow (std::bad_alloc: a long prompt, a large batch, a memory
  /// limit) is kIo, not an exception: the states are then part-way through the layers (their
  /// callers drop them; a server fails those requests and goes on).
  Status forward(std::span<const std::int32_t> tokens, std::span<const SeqSlice> seqs,
                 std::int64_t logits_row0, float* logits, bool decode = false, std::int64_t first_row = 0);
  /// forward's computation (which may throw std::bad_alloc).
  Status forward_layers(std::span<const std::int32_t> tokens, std::span<const SeqSlice> seqs,
                        std::int64_t logits_row0, float* logits, bool decode, std::int64_t first_row);
  Status check_tokens(std::span<const std::int32_t> tokens, const char* call) const;  // call: "prefill" / "step", named in errors
  Status check_state(const State& s, std::int64_t L, const char* call) const;  // L: tokens the call adds to position

  Checkpoint ckpt_;
  ModelWeights weights_;
  std::vector<LayerParams> params_;
  std::vector<float> norm_f_;  ///< [d] final RMSNorm weight, fp32
  Tensor packed_;  ///< the repacked projection weights (pack_projections), viewed by weights_
  Precision precision_ = Precision::kExact;
  std::string precision_reason_;  ///< AutoPrecision::reason when loaded with kAuto, else empty
  Scratch scratch_;                  ///< per-call buffers: one prefill/step at a time (forward_mutex_)
  std::vector<SeqSlice> step_seqs_;  ///< reused by step() (no per-token allocation)
  std::mutex forward_mutex_;         ///< serialises prefill/step calls from several threads
};

}  // namespace mamba::models
