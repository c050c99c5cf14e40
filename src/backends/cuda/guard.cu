// The numerical guard on the device (Executable::last_step_finite), in a form
// a captured CUDA graph can replay: no host decision inside a step. Each
// step's loss and correct count go to per-step scalars; after backward one
// pass flags any non-finite gradient, then one thread decides
// (commit_guarded_step in backends/device_scalars.h, which every device
// shares), and the BN running statistics are copied back after a faulty step.
#include <cmath>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace convoy::cuda {
namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__global__ void begin_step_kernel(DeviceScalars* s) { convoy::begin_guarded_step(s); }

__global__ void flag_nonfinite_kernel(const float* g, int64_t n, DeviceScalars* s) {
  bool bad = false;
  GRID_STRIDE(i, n) bad |= !isfinite(g[i]);
  if (bad) atomicOr(&s->nonfinite, 1);
}

__global__ void commit_step_kernel(int64_t batch, DeviceScalars* s) { commit_guarded_step(s, batch); }

__global__ void restore_state_kernel(float* state, const float* before, int64_t n, const DeviceScalars* s) {
  if (s->step_ok) return;
  GRID_STRIDE(i, n) state[i] = before[i];
}

}  // namespace

void begin_guarded_step(float* state, float* state_before, int64_t state_n, DeviceScalars* scalars,
                        cudaStream_t stream) {
  begin_step_kernel<<<1, 1, 0, stream>>>(scalars);
  CUDA_CHECK_LAUNCH("begin_step_kernel");
  if (state_n > 0)
    CUDA_CHECK(cudaMemcpyAsync(state_before, state, sizeof(float) * state_n, cudaMemcpyDeviceToDevice, stream));
}

void finish_guarded_step(const float* grads, int64_t n, float* state, const float* state_before, int64_t state_n,
                         int64_t batch, DeviceScalars* scalars, cudaStream_t stream) {
  if (n > 0) {
    flag_nonfinite_kernel<<<blocks_for(n), kThreads, 0, stream>>>(grads, n, scalars);
    CUDA_CHECK_LAUNCH("flag_nonfinite_kernel");
  }
  commit_step_kernel<<<1, 1, 0, stream>>>(batch, scalars);
  CUDA_CHECK_LAUNCH("commit_step_kernel");
  if (state_n > 0) {
    restore_state_kernel<<<blocks_for(state_n), kThreads, 0, stream>>>(state, state_before, state_n, scalars);
    CUDA_CHECK_LAUNCH("restore_state_kernel");
  }
}

}  // namespace convoy::cuda
