#pragma once
// The per-layer profile of training steps as a table a person can read, like
// PyTorch's profiler table: time per step forward and backward, share of the
// step, and achieved GFLOP/s.
#include <string>
#include <vector>

#include "convoy/backends/executable.h"

namespace convoy::train {

std::string profile_table(const std::vector<LayerProfile>& layers, int64_t steps);

}  // namespace convoy::train
