#pragma once
// Marks of the GPU's progress through collectives, written by the GPU into
// host memory the host can read while the GPU runs (mapped pinned memory):
// the nccl group's watcher reads them to tell a collective that waits for a
// dead or hung peer from one that is merely queued, and the group's
// statistics count what ran. A kernel, not a host callback: it is captured
// into CUDA graphs like any other, and costs a launch.
//
// The GPU *advances* the counters (reads and adds), rather than writing a
// number the host chose when it enqueued the kernel: a captured graph bakes
// its kernels' arguments in, so a host sequence number would be the same on
// every replay, and the watcher would take a hang after two replays of a
// one-collective graph for progress; summaries would count each captured
// collective once. Only the GPU writes the words (one stream: in order).
#include <cuda_runtime_api.h>

namespace convoy::dist {

struct CollectiveMarks {
  // Collectives the GPU began and finished: they differ while one runs.
  volatile unsigned long long started;
  volatile unsigned long long finished;
  volatile unsigned long long bytes;  // of the finished ones
};

// Enqueue on `stream`: the start of one collective (started += 1) ...
cudaError_t mark_started(CollectiveMarks* marks, cudaStream_t stream);
// ... and its end (finished += 1, bytes += `bytes`). `marks` is the device's
// address of mapped host memory. Return the launch's status.
cudaError_t mark_finished(CollectiveMarks* marks, unsigned long long bytes, cudaStream_t stream);

}  // namespace convoy::dist
