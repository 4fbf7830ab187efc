// CPU Mamba-1 selective scan (Gu & Dao 2023, Alg. 2): sequential over tokens, vectorised over
// channels (kernels.h scan_channels, kLanes channels per vector with the state kept transposed in
// L1), parallel over (sequence, block of channels). Each channel's state row h[e, :] is independent,
// so the split never changes a result.
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
  cpu::parallel_for(items, work * 8 >= cpu::kParallelMinWork, [&](std::int64_t i0, std::int64_t i1) {
    static thread_local std::vector<float> scratch;
    if (scratch.size() < static_cast<std::size_t>(2 * N * k.lanes)) scratch.resize(static_cast<std::size_t>(2 * N * k.lanes));
    for (std::int64_t i = i0; i < i1; ++i) {
      const SelectiveScanArgs& a = seqs[static_cast<std::size_t>(i / blocks)];
      const std::int64_t e0 = (i % blocks) * kChannelBlock, e1 = e0 + kChannelBlock < E ? e0 + kChannelBlock : E;
      k.scan_channels(a, e0, e1, scratch.data());
    }
  });
}

void selective_scan(const SelectiveScanArgs& a) { selective_scan_batch({&a, 1}); }

}  // namespace mamba::ops
