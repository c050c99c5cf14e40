#pragma once
// The per-layer profile of training steps as a table a person can read, like
// PyTorch's profiler table: time per step forward and backward, share of the
// step, and achieved GFLOP/s. A layer the device runs inside another's op
// (LayerProfile::runs_in: the CPU's fused first block) says so in place of
// its rates; its FLOPs count in that layer's.
#include <string>
#include <vector>

#include "convoy/backends/executable.h"

namespace convoy::train {

std::string profile_table(const std::vector<LayerProfile>& layers, int64_t steps);

}  // namespace convoy::train
