#pragma once
// Timing of one bound CPU op, shared by bench/cpu_op_times.cpp and
// bench/conv_algo_times.cpp: best forward and backward times over repeated
// runs, after untimed warm-up runs.
#include <algorithm>
#include <cstdint>
#include <ctime>

#include "backends/cpu/cpu_op.h"

namespace convoy::bench {

inline double seconds(clockid_t clock) {
  timespec t;
  clock_gettime(clock, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct BestPasses {
  double forward = 1e9, backward = 1e9;  // seconds
};

// op must be bound; each run is a training forward pass, then the backward pass.
inline BestPasses best_passes(cpu::CpuOp& op, cpu::DnnlEnv& env, clockid_t clock, int64_t reps, int warmup) {
  BestPasses best;
  for (int64_t r = 0; r < reps + warmup; ++r) {
    const double t0 = seconds(clock);
    op.forward(env, true);
    const double t1 = seconds(clock);
    op.backward(env);
    const double t2 = seconds(clock);
    if (r < warmup) continue;
    best.forward = std::min(best.forward, t1 - t0);
    best.backward = std::min(best.backward, t2 - t1);
  }
  return best;
}

}  // namespace convoy::bench
