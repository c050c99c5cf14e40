#pragma once
// Private to app/: a run config's model compiled on its device (the run's
// phases, and a checkpoint restored for inference).
#include <memory>
#include <string>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/nn/model.h"
#include "convoy/config/run_config.h"

namespace convoy::train {

// Replicas live inside a PJRT program: the CPU that a missing plugin falls back to has none.
void require_replica_device(const RunConfig& c, const DeviceChoice& device);

// On the configured device. `fallback` (when given) gets why the device
// chosen is not the one asked for, when that is news: only when this
// machine has a GPU the user may expect it to use (found but unusable, or
// lacking a layer's kernels), or when the user named the device (pjrt, tpu,
// pjrt-gpu). Without any GPU "auto" settling on the CPU is no news, as
// PyTorch does it (TensorFlow logs once): the run's header names the device
// and `convoy devices` says why no GPU (docs/cuda.md).
std::unique_ptr<Executable> compile_for(const nn::Model& model, const RunConfig& c, int gpu,
                                        std::string* fallback = nullptr);

}  // namespace convoy::train
