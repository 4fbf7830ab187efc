// Shared helpers of the CPU backend: when to go parallel.
#pragma once

#include <cstdint>

namespace mamba::ops::cpu {

/// Below this many multiply-adds an op runs on the calling thread (thread start-up would dominate).
inline constexpr std::int64_t kParallelMinWork = 1 << 17;

}  // namespace mamba::ops::cpu
