#pragma once
// The GPU side of replica_hooks.h: a GradientReducer whose collectives run on
// the GPU in stream order (NCCL; dist/nccl_group.cpp implements it, the CUDA
// executable calls it). A host GradientReducer (the MPI strategy's) cannot
// serve a GPU executable: its spans would be device memory it cannot read.
#include <cstddef>
#include <string>

#include "convoy/backends/replica_hooks.h"
#include "convoy/core/error.h"

namespace convoy {

class DeviceGradientReducer : public GradientReducer {
 public:
  // Once, before any step: the GPU and the stream (a cudaStream_t) the
  // backend's steps run on. From then on ready(), finish() and
  // sum_statistics() take spans of *device* memory and only enqueue work
  // ordered with that stream: they never wait for the GPU, and may be called
  // while the stream is being captured into a CUDA graph. finish() returns
  // once the work that averages the gradients is enqueued ahead of anything
  // enqueued on the stream after it.
  virtual void bind(int gpu, void* stream) = 0;
  // Synchronised batch norm, ordered like finish(): in place, the sums over
  // replicas of n doubles in device memory (per-channel sums and a trailing
  // row count, as StatisticsReducer's).
  virtual void sum_statistics(double* values, std::size_t n) = 0;
};

// A device whose steps run on a stream takes only a DeviceGradientReducer:
// binds `reducer` (null: none) to `stream` and returns it; throws UserError
// for a host reducer.
inline DeviceGradientReducer* bind_device_reducer(GradientReducer* reducer, int gpu, void* stream,
                                                  const std::string& device) {
  auto* on_device = dynamic_cast<DeviceGradientReducer*>(reducer);
  require(reducer == nullptr || on_device != nullptr,
          device + " trains replicas only with --strategy nccl (collectives on the GPUs); --strategy mpi "
                   "trains its replicas on the CPU (--device cpu)");
  if (on_device) on_device->bind(gpu, stream);
  return on_device;
}

}  // namespace convoy
