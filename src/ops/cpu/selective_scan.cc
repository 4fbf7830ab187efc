// CPU Mamba-1 selective scan (Gu & Dao 2023, Alg. 2): sequential over tokens, vectorised over
// channels (kernels.h scan_channels, kLanes channels per vector with the state kept transposed in
// L1), parallel over (sequence, block of channels), balanced at run time in prefill. Each channel's
// state row h[e, :] is independent, so the split never changes a result.
#include <algorithm>
#include <vector>

#include "ops/cpu/kernels.h"
#include "ops/cpu/parallel.h"
#include "ops/cpu/thread_pool.h"
#include "ops/ops.h"
#include "ops/profile.h"

namespace mamba::ops {

namespace {
/// Channels per work item: enough to amortise the state transpose, small enough to spread 1536
/// channels of one decode token over the threads.
constexpr std::int64_t kChannelBlock = 64;
}  // namespace

void selective_scan_batch(std::span<const SelectiveScanArgs> seqs) {
  const ProfileScope profile(OpKind::kScan);
  if (seqs.empty()) return;
  const cpu::Kernels& k = cpu::cpu_kernels();
  const std::int64_t E = seqs[0].E, N = seqs[0].N;
  const std::int64_t blocks = (E + kChannelBlock - 1) / kChannelBlock;
  const std::int64_t items = blocks * static_cast<std::int64_t>(seqs.size());
  std::int64_t work = 0;
  for (const SelectiveScanArgs& a : seqs) work += a.L * E * N;
  // Each (channel, state) step costs an exp (~20 flops), so a decode token (E·N ≈ 25K) already
  // pays for a parallel region.
  auto body = [&](std::int64_t i0, std::int64_t i1) {
    static thread_local std::vector<float> scratch;
    // A thread's consecutive blocks of one sequence go to the kernel as one channel range (a
    // prefill reads each token row as one run of the range's channels).
    for (std::int64_t i = i0; i < i1;) {
      const std::int64_t seq = i / blocks, run_end = std::min(i1, (seq + 1) * blocks);
      const SelectiveScanArgs& a = seqs[static_cast<std::size_t>(seq)];
      const std::int64_t e0 = (i % blocks) * kChannelBlock, e1 = std::min(E, ((run_end - 1) % blocks + 1) * kChannelBlock);
      const auto need = static_cast<std::size_t>(cpu::scan_scratch_floats(N));
      if (scratch.size() < need) scratch.resize(need);
      k.scan_channels(a, e0, e1, scratch.data());
      i = run_end;
    }
  };
  // Prefill: parallel_for_balanced (a block's channels are independent: any split gives the same
  // values; mamba-130m prefill 512 balanced / static 2279 / 2198 tok/s). A decode step keeps the
  // static split (its one-token blocks are short: a hot 1536-channel step took 6.4–6.7 µs balanced
  // against 5.5–5.8 static).
  const bool parallel = work * 8 >= cpu::kParallelMinWork;
  if (seqs[0].decode_step) cpu::parallel_for(items, parallel, body);
  else cpu::parallel_for_balanced(items, 1, parallel, body);
}

void selective_scan(const SelectiveScanArgs& a) { selective_scan_batch({&a, 1}); }

}  // namespace mamba::ops
