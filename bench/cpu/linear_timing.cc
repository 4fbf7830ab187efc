// ops::linear timing (see linear_timing.h).
#include "cpu/linear_timing.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "cpu/cpu_time.h"
#include "ops/ops.h"

namespace mamba::bench {

LinearRate time_linear(const Projection& p, std::int64_t M, double min_seconds) {
  std::vector<float> x(static_cast<std::size_t>(M * p.K)), y(static_cast<std::size_t>(M * p.N));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : x) v = u(rng);
  const auto n = p.weights.size();
  auto call = [&](std::size_t i) { ops::linear(x.data(), p.K, M, p.weights[i % n], p.biases[i % n], y.data(), p.N); };
  // Fault in every layer's weight pages first (the checkpoint is mmapped): with a short
  // --gemm-seconds only a few calls are timed, each on another layer's weight, and page faults
  // made them read 30-300x too slow.
  volatile unsigned char sink = 0;
  for (const TensorView& w : p.weights) {
    const auto* b = static_cast<const unsigned char*>(w.data);
    const auto bytes = static_cast<std::size_t>(w.nbytes());
    for (std::size_t o = 0; o < bytes; o += 4096) sink = sink + b[o];
  }
  call(0);
  LinearRate r;
  r.seconds = 1e30;
  double total = 0;
  const double cpu0 = process_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 1; i <= 2 || total < min_seconds; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    call(i);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.seconds = std::min(r.seconds, s);
    total += s;
    if (i >= 100000) break;
  }
  r.cpu_share = cpu_share(process_cpu_seconds() - cpu0,
                          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                          ops::num_threads(), kGemmShareMinSeconds);
  r.gflops = 2.0 * static_cast<double>(M) * static_cast<double>(p.K) * static_cast<double>(p.N) / r.seconds / 1e9;
  r.weight_gbps = p.weight_bytes / r.seconds / 1e9;
  return r;
}

}  // namespace mamba::bench
