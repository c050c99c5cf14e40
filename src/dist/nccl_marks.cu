#include "dist/nccl_marks.h"

namespace convoy::dist {
namespace {

__global__ void mark_started_kernel(CollectiveMarks* m) {
  m->started = m->started + 1;
  __threadfence_system();  // visible to the host at once
}

__global__ void mark_finished_kernel(CollectiveMarks* m, unsigned long long bytes) {
  m->bytes = m->bytes + bytes;
  __threadfence_system();  // bytes before the count that announces them
  m->finished = m->finished + 1;
  __threadfence_system();
}

}  // namespace

cudaError_t mark_started(CollectiveMarks* marks, cudaStream_t stream) {
  mark_started_kernel<<<1, 1, 0, stream>>>(marks);
  return cudaGetLastError();
}

cudaError_t mark_finished(CollectiveMarks* marks, unsigned long long bytes, cudaStream_t stream) {
  mark_finished_kernel<<<1, 1, 0, stream>>>(marks, bytes);
  return cudaGetLastError();
}

}  // namespace convoy::dist
