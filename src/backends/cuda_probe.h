#pragma once
// The CUDA backend's side of device discovery: built from backends/cuda/ when
// the backend is compiled in, from backends/no_cuda/ otherwise.
#include "convoy/backends/devices.h"

namespace convoy::cuda {

// Looks for GPUs now and checks that GPU `selected` is usable (find_gpus
// caches the answer).
GpuReport probe_gpus(int selected);

}  // namespace convoy::cuda
