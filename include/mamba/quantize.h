// Weight quantization: mamba.cpp's q8 / q4 checkpoint format and `mamba-cli quantize`.
//
// Format (README §"Quantized weights"): an HF-layout directory — config.json (the input's plus
// "quantization_config": {"quant_method": "mamba.cpp", "type": "q8"|"q4", "group_size": 32}),
// model.safetensors (__metadata__ {"mamba.cpp.quantization": "q8"|"q4", "mamba.cpp.group_size":
// "32"}), and the input's tokenizer / generation files copied.
//
// A quantized weight X [N, K] (row n = output feature, K = input features) is stored as
//   X        codes: q8 → I8 [N, K], q ∈ [−127, 127];
//                   q4 → U8 [N, K/2], byte j of a row holds k = 2j (low nibble) and k = 2j + 1
//                        (high nibble), each as q + 8 with q ∈ [−8, 7];
//   X_scale  F32 [N, K/32]: one scale d per group of 32 consecutive weights of a row;
// and means W[n, k] = d[n, k/32] · q[n, k] (symmetric, no zero point).
// q8: d = max|w| / 127 over the group, q = round_half_even(w / d).
// q4: m = the group's weight of largest magnitude (first on ties), d = m / −8, q = clamp(round_half_even(w / d), −8, 7)
//     (so m itself maps to −8 exactly; the llama.cpp Q4_0 rule).
// All-zero groups have d = 0 and q = 0.
// Quantized: every in_proj, x_proj, out_proj, dt_proj whose K is a multiple of 32 (else kept in
// its stored dtype), the embedding (tied: stored once, also the lm_head) and an untied lm_head.
// Everything else (norms, conv1d, A_log, D, biases, dt_bias) is stored F32.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mamba/status.h"

namespace mamba {

enum class QuantType : std::uint8_t { kQ8, kQ4 };

/// Weights per scale along K.
inline constexpr int kQuantGroupSize = 32;

/// Quantizes one row `w[0, K)` (fp32) to q8: codes int8 [K], scales fp32 [K/32] (the caller's
/// buffers). Errors (nothing meaningful written then): kInvalidArgument when K is not a positive
/// multiple of 32; kNumerical naming the first non-finite weight and its index k.
Status quantize_row_q8(const float* w, std::int64_t K, std::int8_t* codes, float* scales);
/// Quantizes one row to q4: codes uint8 [K/2] (packed as above), scales fp32 [K/32]; errors as
/// quantize_row_q8.
Status quantize_row_q4(const float* w, std::int64_t K, std::uint8_t* codes, float* scales);

/// What quantize_checkpoint wrote.
struct QuantizeReport {
  int quantized = 0;            ///< tensors stored as q8/q4
  int kept = 0;                 ///< 2-D projections kept in their stored dtype (K not a multiple of 32)
  int f32 = 0;                  ///< small tensors stored F32
  std::int64_t in_bytes = 0;    ///< bound weight bytes of the input
  std::int64_t out_bytes = 0;   ///< bytes of the written model.safetensors
  std::string kept_names;       ///< comma-separated names of the kept projections (first few)
  /// Temporary directories ".NAME.tmp-PID" of earlier runs for the same out_dir whose process no
  /// longer exists (killed by a signal no handler sees, e.g. SIGKILL), removed before writing.
  std::vector<std::string> removed_stale;
};

/// `mamba-cli quantize`: reads the model directory `in_dir` (anything Checkpoint::open accepts,
/// already resolved), writes the quantized checkpoint to `out_dir`, first under a temporary sibling
/// name, renamed to `out_dir` only when complete (never a half-written checkpoint); such names
/// left beside it by earlier runs whose process is gone are removed (QuantizeReport::removed_stale).
/// The copied tokenizer / generation files are writable by the owner, whatever the input's mode.
/// Errors: kInvalidArgument (a `type` that is no enumerator; out_dir exists; the input is already quantized; no tensor is
/// quantizable, i.e. none has K a multiple of 32, so nothing is written; non-finite weights,
/// naming the tensor), kIo (not writable, write failures), and any load error of the input.
Result<QuantizeReport> quantize_checkpoint(const std::string& in_dir, QuantType type, const std::string& out_dir);

/// The temporary directory quantize_checkpoint(…, out_dir) writes before renaming it to out_dir:
/// ".NAME.tmp-PID" beside it (PID = this process; a NAME over 239 bytes is cut and followed by a
/// hash of it, so that a legal output name of up to 255 bytes still has one). For callers that
/// clean it up on a signal.
std::string quantize_temp_dir(const std::string& out_dir);

/// Every file name quantize_checkpoint may create inside that directory (model.safetensors,
/// config.json, the copied tokenizer / generation files): what such a cleanup must unlink.
std::vector<std::string> quantize_output_files();

}  // namespace mamba
