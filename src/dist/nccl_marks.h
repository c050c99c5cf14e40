#pragma once
// Marks of the GPU's progress through collectives, written by the GPU into
// host memory the host can read while the GPU runs (mapped pinned memory):
// the nccl group's watcher reads them to tell a collective that waits for a
// dead or hung peer from one that is merely queued. A kernel, not a host
// callback: it is captured into CUDA graphs like any other, and costs a launch.
#include <cuda_runtime_api.h>

namespace convoy::dist {

struct CollectiveMarks {
  // The sequence number of the last collective the GPU began, and of the last
  // it finished: they differ while one runs.
  volatile unsigned long long started;
  volatile unsigned long long finished;
};

// Enqueues `*slot = value` on `stream`; `slot` is the device's address of a
// mapped host word. Returns the launch's status.
cudaError_t write_mark(volatile unsigned long long* slot, unsigned long long value, cudaStream_t stream);

}  // namespace convoy::dist
