// Core-to-core handoff latency (see core_round_trip.h).
#include "cpu/core_round_trip.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <system_error>
#include <thread>
#include <vector>

namespace mamba::bench {

double core_round_trip_ns(int rounds) {
  constexpr int kBatches = 5;
  // Two spinning threads on one CPU hand off once per scheduler slice: stop after this long.
  constexpr double kMaxSeconds = 0.2;
  if (rounds < kBatches) return 0;
  const int per_batch = rounds / kBatches;
  // The caller stores an odd number, the answerer the next even one; kStop ends the answerer.
  constexpr int kStop = -1;
  alignas(64) std::atomic<int> flag{0};
  std::vector<double> ns;
  std::thread answerer;
  try {
    answerer = std::thread([&] {
      for (;;) {
        int v;
        while ((v = flag.load(std::memory_order_acquire)) % 2 == 0) {}
        if (v == kStop) return;
        flag.store(v + 1, std::memory_order_release);
      }
    });
  } catch (const std::system_error&) {
    return 0;
  }
  const auto start = std::chrono::steady_clock::now();
  int v = 1;
  for (int b = 0; b < kBatches; ++b) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int j = 0; j < per_batch; ++j, v += 2) {
      flag.store(v, std::memory_order_release);
      while (flag.load(std::memory_order_acquire) != v + 1) {}
    }
    const auto t1 = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count() / per_batch);
    if (std::chrono::duration<double>(t1 - start).count() > kMaxSeconds) break;
  }
  flag.store(kStop, std::memory_order_release);
  answerer.join();
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2];
}

}  // namespace mamba::bench
