#pragma once
// The PJRT device: the device contract (backends/device.h) over a PJRT
// plugin, so the device-neutral Program runs the training step on XLA as it
// does on the CPU: a lazy, tracing device (traced_memory.h). Every kernel the
// Program enqueues (each layer's forward and backward, the loss, the gradient
// sums, the numerical guard, the optimizer, frozen layers' gathers) becomes
// StableHLO in a trace; the trace runs as one compiled module when the host
// waits (to_host) or a bank is released: a chunk of steps_per_execution
// training steps is one module (unrolled), compiled once and run from cache.
#include <memory>

#include "backends/pjrt/plugin.h"
#include "convoy/backends/executable.h"

namespace convoy {

// One replica on the client's first device.
std::unique_ptr<Executable> compile_pjrt_program(const nn::Model& model, const CompileOptions& options, uint64_t seed,
                                                 pjrt::Client& client);

}  // namespace convoy
