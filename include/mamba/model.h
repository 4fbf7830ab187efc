// Model: weights + the forward pass (prefill and decode step), separate from per-sequence State.
//
// Model code (src/models/) calls backend-neutral ops (src/ops/ops.h); it never branches on the
// backend. All activations and states are fp32; weights stay in their stored dtype.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mamba/checkpoint.h"
#include "mamba/config.h"
#include "mamba/state.h"
#include "mamba/status.h"

namespace mamba {

struct ModelWeights;  // mamba/weights.h

/// Arithmetic of the projections (in_proj, x_proj, dt_proj, out_proj, lm_head; README §Precision).
enum class Precision : std::uint8_t {
  kExact,  ///< fp32 activations, weights converted exactly to fp32, fixed fp32 order (the tier checked
           ///< against HF transformers on the fixtures)
  kBF16,   ///< activations and float weights rounded to bf16, AVX-512 BF16 dot products
           ///< (src/ops/cpu/bf16_dot.h); needs a CPU with AVX-512 BF16. Quantized (q8/q4)
           ///< projections keep their own kernels. Batch invariance holds within the tier.
  kInt8,   ///< opt-in, q8/q4 checkpoints only: their quantized projections except lm_head take 8-bit
           ///< activations (per-32-group asymmetric codes, src/ops/cpu/quant_kernels.h) — one
           ///< vpdpbusd per 4 products instead of two; needs AVX-512 VNNI. Float projections stay
           ///< exact. Batch invariance holds within the tier.
  kAuto,   ///< the default, resolved at load (auto_precision): kBF16 where the CPU has the tier, every
           ///< projection is stored in bf16 and its copy fits in memory (the tier rounds only activations; it meets
           ///< issue 5's bounds for a default fast tier: top-1 ≥ 99%, perplexity within 0.5%, tests
           ///< Bf16Tier*), else kExact. Never a loaded Model's precision().
};
/// "exact" / "bf16" / "int8" / "auto".
const char* precision_name(Precision p);
/// Parses "auto" / "exact" / "bf16" / "int8" (kInvalidArgument naming the accepted values otherwise).
Result<Precision> parse_precision(const std::string& s);
/// What Precision::kAuto chose for a checkpoint, and why.
struct AutoPrecision {
  Precision precision = Precision::kExact;  ///< kBF16 or kExact
  std::string reason;  ///< one phrase, e.g. "bf16 weights, AVX-512 BF16" or "F32 projections"
};
/// What Precision::kAuto resolves to for weights bound from a checkpoint (bind_weights) on this
/// machine: kBF16 when (1) every projection `w` has (in_proj, x_proj, dt_proj, out_proj, and lm_head
/// — the embedding when tied) is stored as BF16, so the tier rounds only activations, (2) ops' bf16
/// tier is available (AVX-512 BF16 and the avx512 dispatch target, not forced lower by
/// MAMBA_CPU_TARGET), and (3) the tier's copy of those projections (made at load: anonymous memory,
/// not the file's shared, evictable pages) plus 512 MiB to spare fits in the memory available
/// (MemAvailable of /proc/meminfo, capped by a cgroup v2 or v1 limit's remainder at the mount's root
/// and by an address-space limit's (ulimit -v) remainder beside /proc/self/statm's size; not checked
/// where none is readable) less `reserve_bytes` (what the caller allocates next:
/// LoadOptions::reserve_bytes); kExact otherwise (f32 / f16 weights, q8/q4 checkpoints, other CPUs,
/// too little memory), with the reason. Reads dtypes, /proc and /sys only; never fails. Model::load
/// with kAuto also falls back to kExact when making the copy runs out of memory (a limit these files
/// do not show, e.g. ulimit -d or a cgroup limit set deeper than the mount's root), with that reason.
AutoPrecision auto_precision(const ModelWeights& w, std::int64_t reserve_bytes = 0);

struct LoadOptions {
  int threads = 0;  ///< CPU threads for compute; 0 = the CPUs this process may run on (or OMP_NUM_THREADS). A
                    ///< process-wide setting of the CPU ops, not per model: each load sets it, the
                    ///< last one counts for every model (results are bitwise the same for any thread
                    ///< count). At most kMaxThreads (mamba/thread_limit.h), else load fails with
                    ///< kInvalidArgument; so does 0 with an OMP_NUM_THREADS above it. More threads
                    ///< than CPUs only take turns on them (slower): such regions run as OpenMP
                    ///< teams, one team kept per thread that calls prefill/step.
  /// Default kAuto (bf16 for bf16 checkpoints on CPUs with AVX-512 BF16, else exact: auto_precision).
  /// kBF16 on a CPU without AVX-512 BF16 or with a checkpoint that has no float projection (every
  /// one q8/q4), kInt8 on one without AVX-512 VNNI or with a checkpoint that is not q8/q4, fail with
  /// kInvalidArgument (so does a value that is no enumerator).
  Precision precision = Precision::kAuto;
  /// Bytes the caller allocates once the model is loaded (mamba-server: its preallocated state
  /// slots), ≥ 0: kAuto picks the bf16 tier only if its copy of the projections, 512 MiB and these
  /// fit in the memory available (auto_precision); no other effect. Negative: kInvalidArgument.
  std::int64_t reserve_bytes = 0;
};

/// Which prefill logits to return.
enum class LogitsMode : std::uint8_t {
  kNone,  ///< only advance the state
  kLast,  ///< logits of the last token: [1, logits_width]
  kAll,   ///< logits of every token: [L, logits_width]
};

/// A loaded model. Thread-safe: prefill/step may be called from several threads, each with its own
/// States; the calls run one at a time (they share the model's scratch buffers and the process's
/// compute threads: concurrent callers gain nothing over one thread batching its sequences through
/// step(), as the server's scheduler does). Different States may be passed in any order. A State
/// does not refer to its Model: it stays valid (and usable with another Model of the same config)
/// after the Model is destroyed.
class Model {
 public:
  /// Resolves `model_ref` (dir or HF repo id, see resolve_model_path), opens the checkpoint,
  /// validates every tensor (presence, dtype, shape) before any compute.
  /// Errors, each naming the file / tensor / field and the expected vs actual value:
  /// resolve_model_path's and Checkpoint::open's (kNotFound, kIo, kFormat, kInvalidArgument,
  /// kUnsupported); a missing tensor (kNotFound), a wrong dtype or shape (kShape); an A_log whose
  /// A = −exp(A_log) is not finite (kNumerical); LoadOptions that do not fit the CPU or the
  /// checkpoint, e.g. precision int8 without AVX-512 VNNI or on an unquantized checkpoint
  /// (kInvalidArgument); no memory for the repacked projection weights (kIo).
  static Result<std::unique_ptr<Model>> load(const std::string& model_ref, const LoadOptions& opts = {});
  /// Same, from an already-open checkpoint (takes ownership); its config is validated again
  /// (ModelConfig::validate), so one changed in code is checked too. Errors as load's.
  static Result<std::unique_ptr<Model>> from_checkpoint(Checkpoint ckpt, const LoadOptions& opts = {});

  virtual ~Model() = default;
  /// The model's config (d_mlp completed from the weights); valid while the Model lives.
  virtual const ModelConfig& config() const = 0;
  /// The checkpoint it was loaded from (owned by the Model; its weights are mapped from it).
  virtual const Checkpoint& checkpoint() const = 0;
  /// The projections' arithmetic it was loaded with (LoadOptions::precision, kAuto resolved: never kAuto).
  virtual Precision precision() const { return Precision::kExact; }
  /// Why precision() is what it is when LoadOptions::precision was kAuto (AutoPrecision::reason);
  /// empty when a tier was named.
  virtual std::string precision_reason() const { return {}; }
  /// Width of one logits row = padded vocab (embedding rows).
  virtual std::int64_t logits_width() const = 0;
  /// A zeroed state for a new sequence (fp32, sized from the config: n_layer × (conv_state +
  /// ssm_state), `inspect`'s "state / sequence"), owned by the caller. Throws std::bad_alloc when
  /// out of memory (include/mamba/status.h lists what the API throws).
  virtual State new_state() const = 0;

  /// Feeds `tokens` (L ≥ 1, each < logits_width) to one sequence, continuing from `state`
  /// (updated in place). Writes logits per `mode` into `logits` ([L or 1, logits_width] floats,
  /// caller-owned). Mamba-2 uses SSD chunks aligned to absolute positions (state.position), so
  /// prefill split at multiples of chunk_size is bitwise identical to the unsplit prefill; Mamba-1
  /// and Falcon-Mamba prefill split anywhere is too.
  /// Long prompts are processed internally in pieces of ≤ 512 tokens rounded up to a multiple of chunk_size (Mamba-2; chunk_size 100: 600), cut at
  /// absolute positions (identical results), so scratch memory stays bounded.
  /// Errors: kInvalidArgument (bad id, empty input, a `mode` that is no enumerator, null logits with mode ≠ kNone, a state not made
  /// by this model's new_state() — tensor shapes and dtypes compared — or whose position is
  /// negative or would overflow) — checked before anything is computed, the state is untouched;
  /// kNumerical (non-finite logits, naming row and id) — the state has already advanced; kIo when
  /// the model's scratch buffers, or a compute thread's, cannot grow for this call (out of memory) — the state is then
  /// part-way through the layers and must not be used again (nothing else is lost: the model
  /// serves later calls).
  virtual Status prefill(std::span<const std::int32_t> tokens, State& state, LogitsMode mode,
                         float* logits) = 0;

  /// One decode step for a batch: tokens[b] is the next token of sequence b, states[b] its state
  /// (updated in place). Writes logits [batch, logits_width]. Per-row results are bitwise
  /// independent of the batch size and of the other rows (batch invariance). No allocation once
  /// the largest batch size has been seen. Errors: as prefill, plus tokens/states count mismatch,
  /// a null state, or the same state twice in one batch (kInvalidArgument). kNumerical comes only
  /// after every row's logits are written (the server then fails just the rows that hold a
  /// non-finite logit; the others are what they would be alone).
  virtual Status step(std::span<const std::int32_t> tokens, std::span<State* const> states,
                      float* logits) = 0;

  /// prefill with a sized logits buffer: `logits` must hold at least the floats `mode` writes
  /// (kAll: L × logits_width, kLast: logits_width, kNone: any size, even empty); a smaller one is
  /// kInvalidArgument (naming both sizes) before anything is computed, the state untouched.
  /// Otherwise exactly prefill(tokens, state, mode, logits.data()). (A std::vector<float> or
  /// std::array converts to the span; a C array decays to float* and takes the unchecked overload.
  /// A subclass overriding the virtual ones adds `using Model::prefill; using Model::step;`.)
  Status prefill(std::span<const std::int32_t> tokens, State& state, LogitsMode mode, std::span<float> logits);
  /// step with a sized logits buffer: at least tokens.size() × logits_width floats, else
  /// kInvalidArgument (naming both sizes) before anything is computed. Otherwise exactly
  /// step(tokens, states, logits.data()).
  Status step(std::span<const std::int32_t> tokens, std::span<State* const> states, std::span<float> logits);
};

}  // namespace mamba
