// CPU causal depthwise conv1d + SiLU continuing from conv_state (../shared/docs/mamba-math.md §conv), vectorised
// over channels (kernels.h conv1d_silu_rows reads the weight and the old state transposed, [K, C]
// and [K−1, C], so every tap is a contiguous load), parallel over (sequence, row block). Decode (one
// token per sequence) skips the transposes: conv1d_silu_step, bitwise the same values.
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {

namespace {
constexpr std::int64_t kRowBlock = 16;          ///< rows per work item in prefill
constexpr std::int64_t kDecodeChannels = 256;   ///< channels per work item in decode
constexpr std::int64_t kDecodeParallelChannels = 1024;  ///< decode splits over threads from here
}  // namespace

void conv1d_silu_batch(std::span<const Conv1dSeq> seqs, std::int64_t ldx, std::int64_t C, std::int64_t K,
                       const float* wT, const float* bias) {
  const ProfileScope profile(OpKind::kConv);
  if (seqs.empty()) return;
  const cpu::Kernels& k = cpu::cpu_kernels();
  const std::int64_t S = K - 1, n_seq = static_cast<std::int64_t>(seqs.size());
  bool decode = true;
  for (const Conv1dSeq& s : seqs) decode = decode && s.L == 1;
  if (decode) {  // one token per sequence: no transposes, the state advanced in place
    // Items: (sequence, block of kDecodeChannels channels). A channel costs K FMAs, a SiLU and
    // K−1 state moves from memory the weight stream has evicted, so ≥ kDecodeParallelChannels
    // channels (one token of a 1536-channel layer) pay for a parallel region.
    const std::int64_t blocks = (C + kDecodeChannels - 1) / kDecodeChannels, n_items = n_seq * blocks;
    cpu::parallel_for(n_items, n_seq * C >= kDecodeParallelChannels, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        const Conv1dSeq& s = seqs[std::size_t(i / blocks)];
        const std::int64_t c0 = (i % blocks) * kDecodeChannels, c1 = c0 + kDecodeChannels < C ? c0 + kDecodeChannels : C;
        k.conv1d_silu_step(s.x, c0, c1, C, K, wT, bias, s.conv_state, s.y);
      }
    });
    return;
  }
  // Old states transposed, [n_seq][S, C] (the states are overwritten below).
  static thread_local std::vector<float> stT;
  if (stT.size() < static_cast<std::size_t>(n_seq * S * C)) stT.resize(static_cast<std::size_t>(n_seq * S * C));
  for (std::int64_t q = 0; q < n_seq; ++q)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t j = 0; j < S; ++j) stT[std::size_t((q * S + j) * C + c)] = seqs[std::size_t(q)].conv_state[c * S + j];

  // Work items: (sequence, block of kRowBlock rows).
  std::int64_t items = 0, work = 0;
  static thread_local std::vector<std::int64_t> first;  // first item of each sequence
  if (first.size() < static_cast<std::size_t>(n_seq + 1)) first.resize(static_cast<std::size_t>(n_seq + 1));
  for (std::int64_t q = 0; q < n_seq; ++q) {
    first[std::size_t(q)] = items;
    items += (seqs[std::size_t(q)].L + kRowBlock - 1) / kRowBlock;
    work += seqs[std::size_t(q)].L * C * K;
  }
  first[std::size_t(n_seq)] = items;
  const float* stTp = stT.data();
  const std::int64_t* firstp = first.data();
  cpu::parallel_for(items, work >= cpu::kParallelMinWork, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      std::int64_t q = 0;
      while (firstp[q + 1] <= i) ++q;
      const Conv1dSeq& s = seqs[std::size_t(q)];
      const std::int64_t t0 = (i - firstp[q]) * kRowBlock, t1 = t0 + kRowBlock < s.L ? t0 + kRowBlock : s.L;
      // This thread's next item is the next row block of the sequence (unless this is its last).
      const bool next_is_ours = i + 1 < i1 && i + 1 < firstp[q + 1];
      const std::int64_t next_end = next_is_ours ? (t1 + kRowBlock < s.L ? t1 + kRowBlock : s.L) : t1;
      k.conv1d_silu_rows(s.x, ldx, t0, t1, 0, C, C, K, wT, bias, stTp + q * S * C, s.y, next_end);
    }
  });
  // New conv_state = last S entries of (conv_state ++ x): entry j is window index L + j.
  for (const Conv1dSeq& s : seqs)
    for (std::int64_t c = 0; c < C; ++c)
      for (std::int64_t j = 0; j < S; ++j) {
        const std::int64_t src = s.L + j;  // ≥ j: reading ahead of the write, safe in place
        s.conv_state[c * S + j] = src < S ? s.conv_state[c * S + src] : s.x[(src - S) * ldx + c];
      }
}

void conv1d_silu(const float* x, std::int64_t ldx, std::int64_t L, std::int64_t C, std::int64_t K,
                 const float* w, const float* bias, float* conv_state, float* y) {
  static thread_local std::vector<float> wT;
  if (wT.size() < static_cast<std::size_t>(K * C)) wT.resize(static_cast<std::size_t>(K * C));
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t j = 0; j < K; ++j) wT[std::size_t(j * C + c)] = w[c * K + j];
  const Conv1dSeq s{x, L, conv_state, y};
  conv1d_silu_batch({&s, 1}, ldx, C, K, wT.data(), bias);
}

}  // namespace mamba::ops
