#pragma once
// The PJRT device: the device contract (backends/device.h) over a PJRT
// plugin, so the device-neutral Program runs the training step on XLA as it
// does on the CPU: a lazy, tracing device (traced_memory.h). Every kernel the
// Program enqueues (each layer's forward and backward, the loss, the gradient
// sums, the numerical guard, the optimizer, frozen layers' gathers) becomes
// StableHLO in a trace; the trace runs as one compiled module when the host
// waits (to_host) or a bank is released: a chunk of steps_per_execution
// training steps is one module (unrolled), compiled once and run from cache.
// With replicas the trace is the program every replica runs (SPMD): its
// gradient reducer and synchronised batch norm are stablehlo.all_reduce.
#include <memory>
#include <string>

#include "backends/pjrt/plugin.h"
#include "convoy/backends/executable.h"

namespace convoy {

// A Program on the device: one replica on the client's first device, or
// options.pjrt.replicas (the client must have that many devices), each
// training on its part of the batch, gradients averaged by an all-reduce in
// the trace and batch-norm sums all-reduced too with sync_batch_norm.
std::unique_ptr<Executable> compile_pjrt_program(const nn::Model& model, const CompileOptions& options, uint64_t seed,
                                                 pjrt::Client& client);

// The StableHLO text of the module `e` (compile_pjrt's) ran last (tests).
const std::string& pjrt_last_module(Executable& e);

}  // namespace convoy
