#pragma once
// Shared by the .cu files: grid sizes for grid-stride loops, and launch checks.
#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_check.h"

namespace convoy::cuda {

inline constexpr int kThreads = 256;

// Enough blocks to cover n with one element per thread, capped: the kernels
// loop (grid-stride), so any n is covered.
inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 4096));
}

}  // namespace convoy::cuda
