// Model::load / from_checkpoint and MambaModel's forward pass (shared by all architectures).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include <unistd.h>

#include "mamba/thread_limit.h"
#include "models/mamba_model.h"
#include "ops/cpu/cpu_target.h"
#include "ops/ops.h"

namespace mamba {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kBF16: return "bf16";
    case Precision::kInt8: return "int8";
    case Precision::kAuto: return "auto";
    default: return "exact";
  }
}

Result<Precision> parse_precision(const std::string& name) {
  std::string s = name;  // any case, as MAMBA_CPU_TARGET
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  if (s == "auto") return Precision::kAuto;
  if (s == "exact") return Precision::kExact;
  if (s == "bf16") return Precision::kBF16;
  if (s == "int8") return Precision::kInt8;
  return make_error(ErrorCode::kInvalidArgument, fmt::format("precision '{}': expected one of auto, exact, bf16, int8", name));
}

namespace {
/// The projection weights a precision tier applies to (every layer's four, then lm_head), as
/// pointers into `w` (const for a const `w`): what auto_precision checks and pack_projections copies.
template <class Weights>
auto projection_views(Weights& w) {
  using View = std::conditional_t<std::is_const_v<Weights>, const TensorView, TensorView>;
  std::vector<View*> views;
  for (auto& lw : w.layers)
    for (View* v : {&lw.in_proj, &lw.x_proj, &lw.dt_proj, &lw.out_proj}) views.push_back(v);
  views.push_back(&w.lm_head);
  return views;
}

/// The first integer in `path` (a /sys or /proc value), or −1 when unreadable or not a number ("max").
long long read_number(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return -1;
  long long v = -1;
  if (std::fscanf(f, "%lld", &v) != 1) v = -1;
  std::fclose(f);
  return v;
}

/// The number of the first line of `path` that `format` (one %lld after the line's label) reads,
/// or −1 when unreadable or when no line has a number there ("unlimited").
long long read_labelled(const std::string& path, const char* format) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return -1;
  char line[256];
  long long v = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, format, &v) == 1) break;
  std::fclose(f);
  return v;
}
}  // namespace

std::int64_t models::mem_available_bytes(const std::string& root) {
  const long long kib = read_labelled(root + "/proc/meminfo", "MemAvailable: %lld kB");
  long long avail = kib >= 0 ? kib * 1024 : -1;
  // Each limit caps it by what it leaves: limit − used (0 when over), where both are readable.
  const auto cap = [&](long long limit, long long used) {
    if (limit < 0 || used < 0) return;
    const long long left = limit > used ? limit - used : 0;
    avail = avail < 0 ? left : std::min(avail, left);
  };
  // A cgroup limit at the mount's root (a container's --memory; not a systemd service's MemoryMax,
  // which sits deeper in the tree): what is left under it. v2 has
  // memory.max ("max": none) at the mount; v1 a memory controller directory with limit_in_bytes
  // (no limit: a number near 2⁶³, which leaves MemAvailable in charge).
  cap(read_number(root + "/sys/fs/cgroup/memory.max"), read_number(root + "/sys/fs/cgroup/memory.current"));
  cap(read_number(root + "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
      read_number(root + "/sys/fs/cgroup/memory/memory.usage_in_bytes"));
  // An address-space limit (ulimit -v, RLIMIT_AS) beside this process's mapped size
  // (/proc/self/statm's first field, in pages; the checkpoint's mapping included).
  const long long pages = read_number(root + "/proc/self/statm"), page = sysconf(_SC_PAGESIZE);
  if (pages >= 0 && page > 0) cap(read_labelled(root + "/proc/self/limits", "Max address space %lld"), pages * page);
  return avail;
}

AutoPrecision models::auto_precision_for(const ModelWeights& w, bool tier_available, std::int64_t mem_available,
                                         std::int64_t reserve_bytes) {
  std::int64_t copy_bytes = 0;
  for (const TensorView* v : projection_views(w)) {
    if (v->empty()) continue;
    if (v->dtype != DType::kBF16)
      return {Precision::kExact, fmt::format("{} {}", dtype_name(v->dtype), v == &w.lm_head ? "lm_head" : "projections")};
    copy_bytes += ops::pack_weight_bf16_bytes(*v);
  }
  if (!tier_available) return {Precision::kExact, "no AVX-512 BF16 on this CPU target"};
  // (reserve_bytes compared with what is left, so no value of it overflows the sum)
  if (mem_available >= 0 &&
      (copy_bytes + kAutoMemoryHeadroom > mem_available || reserve_bytes > mem_available - copy_bytes - kAutoMemoryHeadroom))
    return {Precision::kExact,
            fmt::format("the bf16 tier's copy of the projections ({:.2f} GB){} and {} MiB to spare exceed the memory available "
                        "({:.2f} GB)", double(copy_bytes) * 1e-9,
                        reserve_bytes > 0 ? fmt::format(", {:.2f} GB reserved (states, caches)", double(reserve_bytes) * 1e-9) : "",
                        kAutoMemoryHeadroom >> 20, double(mem_available) * 1e-9)};
  return {Precision::kBF16, "bf16 weights, AVX-512 BF16"};
}

AutoPrecision auto_precision(const ModelWeights& w, std::int64_t reserve_bytes) {
  return models::auto_precision_for(w, ops::bf16_tier_available(), models::mem_available_bytes(), reserve_bytes);
}

Result<std::unique_ptr<Model>> Model::load(const std::string& model_ref, const LoadOptions& opts) {
  MAMBA_ASSIGN_OR_RETURN(std::string dir, resolve_model_path(model_ref));
  MAMBA_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  return from_checkpoint(std::move(ckpt), opts);
}

Result<std::unique_ptr<Model>> Model::from_checkpoint(Checkpoint ckpt, const LoadOptions& opts) {
  MAMBA_RETURN_IF_ERROR(check_thread_count(opts.threads, "LoadOptions::threads"));
  if (opts.threads == 0) {  // the default follows OMP_NUM_THREADS (its first entry): held to the same bound, not clamped
    if (const long long n = omp_num_threads_setting(); n > kMaxThreads)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("OMP_NUM_THREADS = {}: expected 1 to {} threads (or give the thread count explicitly: mamba-cli -t N, mamba-server --threads N, LoadOptions::threads)",
                                    n, kMaxThreads));
  }
  return models::MambaModel::create(std::move(ckpt), opts);
}

namespace {
/// Whether `have` floats hold `rows` rows of `width` (no overflow: compared by division).
bool holds_rows(std::size_t have, std::size_t rows, std::int64_t width) {
  return width <= 0 || have / static_cast<std::size_t>(width) >= rows;
}
}  // namespace

Status Model::prefill(std::span<const std::int32_t> tokens, State& state, LogitsMode mode, std::span<float> logits) {
  const std::size_t rows = mode == LogitsMode::kAll ? tokens.size() : mode == LogitsMode::kLast ? 1 : 0;
  if (!holds_rows(logits.size(), rows, logits_width()))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("prefill: logits buffer of {} floats, expected at least {} ({} row{} × logits_width {})", logits.size(),
                                  static_cast<std::uint64_t>(rows) * static_cast<std::uint64_t>(logits_width()), rows, rows == 1 ? "" : "s",
                                  logits_width()));
  return prefill(tokens, state, mode, logits.data());
}

Status Model::step(std::span<const std::int32_t> tokens, std::span<State* const> states, std::span<float> logits) {
  if (states.size() != tokens.size())  // first: a buffer sized for the states would be named otherwise
    return make_error(ErrorCode::kInvalidArgument, fmt::format("step: {} tokens but {} states", tokens.size(), states.size()));
  if (!holds_rows(logits.size(), tokens.size(), logits_width()))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("step: logits buffer of {} floats, expected at least {} ({} row{} × logits_width {})", logits.size(),
                                  static_cast<std::uint64_t>(tokens.size()) * static_cast<std::uint64_t>(logits_width()),
                                  tokens.size(), tokens.size() == 1 ? "" : "s", logits_width()));
  return step(tokens, states, logits.data());
}

namespace models {
namespace {

/// Prefill runs in pieces of at most this many tokens (rounded up to a multiple of chunk_size),
/// cut at absolute multiples of it, so scratch stays bounded and SSD chunks are unchanged.
constexpr std::int64_t kPrefillPiece = 512;

/// A small per-channel tensor as fp32 (A_log, D, biases, norms, conv weights).
Result<std::vector<float>> to_f32(const TensorView& t, const std::string& what) {
  if (t.empty()) return std::vector<float>{};
  if (!t.is_contiguous())
    return make_error(ErrorCode::kShape, fmt::format("{}: expected a contiguous tensor", what));
  std::vector<float> v(static_cast<std::size_t>(t.numel()));
  if (!convert_to_f32(t.data, t.dtype, v.size(), v.data()))
    return make_error(ErrorCode::kShape,
                      fmt::format("{}: expected dtype F32/BF16/F16, got {}", what, dtype_name(t.dtype)));
  return v;
}

}  // namespace

Tensor pack_projections(ModelWeights& w, Precision precision, const Checkpoint* release_from) {
  const std::vector<TensorView*> views = projection_views(w);
  // Which copy each weight gets (quantized → blocked for the integer kernels; float → the bf16
  // tier's), and its offset in one allocation (64-byte aligned slices: one allocation rounds up to
  // a 2 MiB page once, not once per tensor).
  // The int8 tier leaves lm_head at 16-bit activations: the logits are where 8-bit codes cost the
  // most top-1 agreement (the three reference models, q8 and q4: 99.07–99.56% with it, 99.27–99.71%
  // without), and a weight whose group sums overflow fp32 keeps the exact tier's arithmetic.
  enum class Copy { kBlocked, kBf16, kInt8 };
  std::vector<std::pair<std::int64_t, Copy>> slots;  // (offset or −1, which copy)
  std::int64_t total = 0;
  for (TensorView* v : views) {
    std::int64_t bytes = ops::pack_weight_bytes(*v);
    Copy copy = Copy::kBlocked;
    if (bytes == 0 && precision == Precision::kBF16) {
      copy = Copy::kBf16;
      bytes = ops::pack_weight_bf16_bytes(*v);
    } else if (bytes > 0 && precision == Precision::kInt8 && v != &w.lm_head) {
      if (const std::int64_t int8_bytes = ops::pack_weight_int8_bytes(*v); int8_bytes > 0) {
        copy = Copy::kInt8;
        bytes = int8_bytes;
      }
    }
    slots.emplace_back(bytes > 0 ? total : -1, copy);
    total += (bytes + 63) / 64 * 64;
  }
  if (total == 0) return Tensor();
  Tensor packed = Tensor::uninitialized_huge(DType::kU8, Shape{total});
  for (std::size_t i = 0; i < views.size(); ++i) {
    const auto [offset, copy] = slots[i];
    if (offset < 0) continue;
    std::uint8_t* dst = packed.data<std::uint8_t>() + offset;
    if (copy == Copy::kBf16) ops::pack_weight_bf16_to(*views[i], dst);
    else if (copy == Copy::kInt8) ops::pack_weight_int8_to(*views[i], dst);
    else ops::pack_weight_to(*views[i], dst);
    // The stored bytes are read again only for embedding rows (which fault back in): out of the
    // resident set, so the copy does not double it.
    if (release_from != nullptr) {
      release_from->release_pages(views[i]->data, views[i]->nbytes());
      if (views[i]->scales != nullptr && views[i]->group_size > 0) {
        const std::int64_t groups = (views[i]->shape[1] + views[i]->group_size - 1) / views[i]->group_size;
        release_from->release_pages(views[i]->scales,
                                    dtype_bytes(views[i]->scale_dtype, static_cast<std::size_t>(views[i]->shape[0] * groups)));
      }
    }
  }
  return packed;
}

Result<std::unique_ptr<Model>> MambaModel::create(Checkpoint ckpt, const LoadOptions& opts) {
  MAMBA_RETURN_IF_ERROR(ckpt.config().validate(ckpt.dir() + "/config.json"));  // a config changed in code too
  if (opts.precision != Precision::kExact && opts.precision != Precision::kBF16 && opts.precision != Precision::kInt8 &&
      opts.precision != Precision::kAuto)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("LoadOptions::precision {} is not a Precision (auto, exact, bf16 or int8)",
                                                               static_cast<int>(opts.precision)));
  if (opts.reserve_bytes < 0)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("LoadOptions::reserve_bytes {}: expected ≥ 0", opts.reserve_bytes));
  if (opts.precision == Precision::kInt8 && !ops::int8_tier_available())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("precision int8 needs a CPU with AVX-512 VNNI (vpdpbusd) and the avx512 dispatch target; "
                                  "this one runs {}: use precision exact or auto (--precision exact / auto, the default)", ops::cpu::cpu_target_description()));
  if (opts.precision == Precision::kInt8 && ckpt.config().quant_type.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: precision int8 applies to the projections of a q8/q4 checkpoint, and this one is not "
                                  "quantized: quantize it first (mamba-cli quantize -m {} --type q8 -o OUT), or use precision "
                                  "exact or bf16", ckpt.dir(), ckpt.dir()));
  if (opts.precision == Precision::kBF16 && !ops::bf16_tier_available())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("precision bf16 needs a CPU with AVX-512 BF16 (vdpbf16ps) and the avx512 dispatch target; "
                                  "this one runs {}: use precision exact or auto (--precision exact / auto, the default)", ops::cpu::cpu_target_description()));
  MAMBA_ASSIGN_OR_RETURN(ModelWeights w, bind_weights(ckpt));
  AutoPrecision chosen{opts.precision, {}};
  if (opts.precision == Precision::kAuto) chosen = auto_precision(w, opts.reserve_bytes);
  if (opts.precision == Precision::kBF16) {  // as int8 without quantized weights: a tier that would change nothing
    // What pack_projections gives the tier's copy: no blocked integer copy, a bf16 one.
    auto takes_bf16 = [](const TensorView& v) {
      return !v.empty() && ops::pack_weight_bytes(v) == 0 && ops::pack_weight_bf16_bytes(v) > 0;
    };
    bool any_float = false;
    for (const TensorView* v : projection_views(std::as_const(w))) any_float = any_float || takes_bf16(*v);
    if (!any_float)
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: precision bf16 applies to float (f32 / bf16 / f16) projections, and every projection "
                                    "of this checkpoint is {}: use precision exact or int8", ckpt.dir(), ckpt.config().quant_type));
  }
  const ModelConfig& c = ckpt.config();
  std::vector<LayerParams> params(static_cast<std::size_t>(c.n_layer));
  for (std::int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
    LayerParams& p = params[static_cast<std::size_t>(l)];
    const std::string pre = fmt::format("{}: layer {} ", ckpt.dir(), l);
    MAMBA_ASSIGN_OR_RETURN(p.norm, to_f32(lw.norm, pre + "norm.weight"));
    MAMBA_ASSIGN_OR_RETURN(p.conv_w, to_f32(lw.conv1d_weight, pre + "mixer.conv1d.weight"));  // [C,1,K] = [C,K]
    p.conv_wT.resize(p.conv_w.size());
    for (std::int64_t ch = 0; ch < c.conv_channels(); ++ch)
      for (std::int64_t k = 0; k < c.d_conv; ++k)
        p.conv_wT[std::size_t(k * c.conv_channels() + ch)] = p.conv_w[std::size_t(ch * c.d_conv + k)];
    MAMBA_ASSIGN_OR_RETURN(p.conv_b, to_f32(lw.conv1d_bias, pre + "mixer.conv1d.bias"));
    MAMBA_ASSIGN_OR_RETURN(p.A, to_f32(lw.A_log, pre + "mixer.A_log"));
    for (std::size_t i = 0; i < p.A.size(); ++i) {
      p.A[i] = -std::exp(p.A[i]);  // A = −exp(A_log)
      // The scan kernels rely on a finite A (a NaN Δ·A would not reach the state otherwise).
      if (!std::isfinite(p.A[i]))
        return make_error(ErrorCode::kNumerical,
                          fmt::format("{}mixer.A_log: element {} gives A = −exp(A_log) = {} (must be finite; "
                                      "A_log ≤ 88)", pre, i, p.A[i]));
    }
    MAMBA_ASSIGN_OR_RETURN(p.D, to_f32(lw.D, pre + "mixer.D"));
    MAMBA_ASSIGN_OR_RETURN(p.dt_bias, to_f32(lw.dt_bias, pre + "mixer.dt_bias"));
    MAMBA_ASSIGN_OR_RETURN(p.gated_norm, to_f32(lw.gated_norm, pre + "mixer.norm.weight"));
  }
  MAMBA_ASSIGN_OR_RETURN(std::vector<float> norm_f, to_f32(w.norm_f, ckpt.dir() + ": norm_f.weight"));
  ops::set_num_threads(opts.threads);
  Tensor packed;
  try {
    try {
      packed = pack_projections(w, chosen.precision, &ckpt);
    } catch (const std::bad_alloc&) {
      // auto's copy did not fit a limit mem_available_bytes does not read (ulimit -d, a cgroup limit
      // set below the mount's root, memory another process took since): the exact tier reads the
      // mapped file instead.
      if (opts.precision != Precision::kAuto || chosen.precision != Precision::kBF16) throw;
      chosen = {Precision::kExact, "the bf16 tier's copy of the projections did not fit in memory"};
      packed = pack_projections(w, chosen.precision, &ckpt);
    }
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kIo,
                      fmt::format("{}: out of memory for the repacked projection weights (a copy of their size is "
                                  "made at load: quantized weights on AVX-512 VNNI CPUs, float weights with precision "
                                  "bf16, the default for bf16 checkpoints on AVX-512 BF16 CPUs); free memory or load with "
                                  "MAMBA_CPU_TARGET=avx2 / precision exact (--precision exact)",
                                  ckpt.dir()));
  }
  auto* m = new MambaModel(std::move(ckpt), std::move(w), std::move(params));
  m->norm_f_ = std::move(norm_f);
  m->packed_ = std::move(packed);
  m->precision_ = chosen.precision;
  m->precision_reason_ = std::move(chosen.reason);
  return std::unique_ptr<Model>(m);
}

MambaModel::MambaModel(Checkpoint ckpt, ModelWeights weights, std::vector<LayerParams> params)
    : ckpt_(std::move(ckpt)), weights_(std::move(weights)), params_(std::move(params)) {}

State MambaModel::new_state() const {
  const ModelConfig& c = config();
  State s;
  for (std::int64_t l = 0; l < c.n_layer; ++l) {
    s.conv_state.emplace_back(DType::kF32, Shape{c.conv_channels(), c.d_conv - 1});
    if (c.arch == Arch::kMamba2)
      s.ssm_state.emplace_back(DType::kF32, Shape{c.n_heads, c.head_dim, c.d_state});
    else
      s.ssm_state.emplace_back(DType::kF32, Shape{c.d_inner, c.d_state});
  }
  return s;
}

Status MambaModel::check_tokens(std::span<const std::int32_t> tokens, const char* call) const {
  if (tokens.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: empty token input ({})", call,
                                  std::string_view(call) == "step" ? "one token per sequence" : "L ≥ 1 tokens"));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= logits_width())
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: token {} at index {} is out of range [0, {})",
                                                                 call, tokens[i], i, logits_width()));
  return {};
}

Status MambaModel::check_state(const State& s, std::int64_t L, const char* call) const {
  const ModelConfig& c = config();
  const auto n = static_cast<std::size_t>(c.n_layer);
  const Shape conv{c.conv_channels(), c.d_conv - 1};
  const Shape ssm = c.arch == Arch::kMamba2 ? Shape{c.n_heads, c.head_dim, c.d_state} : Shape{c.d_inner, c.d_state};
  // What differs, first found: the layer count, then per layer each tensor's shape, dtype, storage.
  std::string why;
  if (s.conv_state.size() != n || s.ssm_state.size() != n) {
    why = s.conv_state.empty() && s.ssm_state.empty()
              ? fmt::format("it holds no layers (a default-constructed or moved-from State); this model has {}", n)
              : fmt::format("it holds {} conv_state and {} ssm_state layers, this model {}", s.conv_state.size(), s.ssm_state.size(), n);
  }
  for (std::size_t l = 0; why.empty() && l < n; ++l) {
    for (const auto& [name, t, want] : {std::tuple<const char*, const Tensor*, const Shape*>{"conv_state", &s.conv_state[l], &conv},
                                        std::tuple<const char*, const Tensor*, const Shape*>{"ssm_state", &s.ssm_state[l], &ssm}}) {
      if (t->shape() != *want) why = fmt::format("{}[{}] has shape {}, this model's {}", name, l, t->shape().str(), want->str());
      else if (t->dtype() != DType::kF32) why = fmt::format("{}[{}] is {}, not f32", name, l, dtype_name(t->dtype()));
      else if (t->data<float>() == nullptr) why = fmt::format("{}[{}] has no storage", name, l);
      if (!why.empty()) break;
    }
  }
  if (!why.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: state does not match this model: {} (use Model::new_state() of the same model)", call, why));
  if (s.position < 0 || s.position > std::numeric_limits<std::int64_t>::max() - L)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: state.position is {}: expected tokens consumed so far, from 0 to 2^63 − 1 − {} (the input's length)",
                                  call, s.position, L));
  return {};
}

Status MambaModel::prefill(std::span<const std::int32_t> tokens, State& state, LogitsMode mode, float* logits) {
  const std::lock_guard<std::mutex> lock(forward_mutex_);  // the scratch buffers are the model's
  MAMBA_RETURN_IF_ERROR(check_tokens(tokens, "prefill"));
  MAMBA_RETURN_IF_ERROR(check_state(state, static_cast<std::int64_t>(tokens.size()), "prefill"));
  if (mode != LogitsMode::kNone && mode != LogitsMode::kLast && mode != LogitsMode::kAll)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("prefill: mode = {}: expected LogitsMode kNone, kLast or kAll", static_cast<int>(mode)));
  if (mode != LogitsMode::kNone && logits == nullptr)
    return make_error(ErrorCode::kInvalidArgument, "prefill: logits buffer is null");
  const std::int64_t L = static_cast<std::int64_t>(tokens.size()), V = logits_width();
  std::int64_t t0 = 0;
  while (t0 < L) {
    const std::int64_t len = config().prompt_piece(state.position, L - t0, kPrefillPiece);
    const bool last = t0 + len == L;
    const SeqSlice seq{0, len, &state};
    float* out = nullptr;
    std::int64_t row0 = len;
    if (mode == LogitsMode::kAll) {
      out = logits + t0 * V;
      row0 = 0;
    } else if (mode == LogitsMode::kLast && last) {
      out = logits;
      row0 = len - 1;
    }
    MAMBA_RETURN_IF_ERROR(forward(tokens.subspan(std::size_t(t0), std::size_t(len)), {&seq, 1}, row0, out, false, t0));
    t0 += len;
  }
  return {};
}

Status MambaModel::step(std::span<const std::int32_t> tokens, std::span<State* const> states, float* logits) {
  const std::lock_guard<std::mutex> lock(forward_mutex_);
  MAMBA_RETURN_IF_ERROR(check_tokens(tokens, "step"));
  if (states.size() != tokens.size())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("step: {} tokens but {} states", tokens.size(), states.size()));
  if (logits == nullptr) return make_error(ErrorCode::kInvalidArgument, "step: logits buffer is null");
  step_seqs_.clear();
  for (std::size_t b = 0; b < states.size(); ++b) {
    if (states[b] == nullptr) return make_error(ErrorCode::kInvalidArgument, fmt::format("step: state {} is null", b));
    MAMBA_RETURN_IF_ERROR(check_state(*states[b], 1, "step"));
    for (std::size_t o = 0; o < b; ++o)
      if (states[o] == states[b])
        return make_error(ErrorCode::kInvalidArgument, fmt::format("step: states {} and {} are the same", o, b));
    step_seqs_.push_back(SeqSlice{static_cast<std::int64_t>(b), 1, states[b]});
  }
  return forward(tokens, step_seqs_, 0, logits, /*decode=*/true);
}

Status MambaModel::forward(std::span<const std::int32_t> tokens, std::span<const SeqSlice> seqs,
                           std::int64_t logits_row0, float* logits, bool decode, std::int64_t first_row) {
  try {
    return forward_layers(tokens, seqs, logits_row0, logits, decode, first_row);
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kIo, fmt::format("{}: out of memory for the scratch buffers of {} row{} ({} sequence{}); the "
                                                  "state{} advanced part-way and must not be used again",
                                                  decode ? "step" : "prefill", tokens.size(), tokens.size() == 1 ? "" : "s",
                                                  seqs.size(), seqs.size() == 1 ? "" : "s", seqs.size() == 1 ? "" : "s"));
  }
}

// The whole forward pass: embed → per layer: norm → mixer → residual → final norm → lm_head.
Status MambaModel::forward_layers(std::span<const std::int32_t> tokens, std::span<const SeqSlice> seqs,
                                  std::int64_t logits_row0, float* logits, bool decode, std::int64_t first_row) {
  const ModelConfig& c = config();
  const std::int64_t T = static_cast<std::int64_t>(tokens.size()), d = c.d_model, V = logits_width();
  const auto eps = static_cast<float>(c.norm_eps);
  float* h = Scratch::get(scratch_.h, T * d);    // [T, d] residual stream (fp32)
  float* x = Scratch::get(scratch_.x, T * d);    // [T, d] normed block input
  float* mix = Scratch::get(scratch_.mix, T * d);// [T, d] mixer output

  // Each block: x = norm(h); h += mixer(x). The residual add runs fused with the next norm
  // (add_rms_norm), the last block's with norm_f over the rows that get logits.
  ops::embedding(weights_.embedding, tokens, h);
  ops::rms_norm(h, d, T, d, params_[0].norm.data(), eps, x, d);
  for (std::int64_t l = 0; l < c.n_layer; ++l) {
    const auto li = static_cast<std::size_t>(l);
    const MixerContext ctx{c, weights_.layers[li], params_[li], l, scratch_, decode, precision_ == Precision::kBF16};
    if (c.arch == Arch::kMamba2)
      mamba2_mixer(ctx, x, T, seqs, mix);
    else
      mamba1_mixer(ctx, x, T, seqs, mix);
    if (l + 1 < c.n_layer) ops::add_rms_norm(h, mix, T, d, params_[li + 1].norm.data(), eps, x);
  }
  for (const SeqSlice& q : seqs) q.state->position += q.len;
  if (logits == nullptr || logits_row0 >= T) return {};

  const std::int64_t n_out = T - logits_row0;
  ops::add_rms_norm(h + logits_row0 * d, mix + logits_row0 * d, n_out, d, norm_f_.data(), eps, x);
  ops::linear(x, d, n_out, weights_.lm_head, TensorView(), logits, V);
  if (const std::int64_t i = ops::find_non_finite(logits, n_out * V); i >= 0)
    return make_error(ErrorCode::kNumerical,
                      fmt::format("non-finite logit {} at row {}, id {} (weights, activations or the state overflowed or hold a NaN)",
                                  logits[i], first_row + logits_row0 + i / V, i % V));
  return {};
}

}  // namespace models
}  // namespace mamba
