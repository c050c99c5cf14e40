// The numerical guard on the device (Executable::last_step_finite), in a form
// a captured CUDA graph can replay: no host decision inside a step. Each
// step's loss and correct count go to per-step scalars; after backward one
// pass flags any non-finite gradient, then one thread decides:
//   finite and no earlier fault in this execution: commit the step's metrics,
//     count it in steps_done, step_ok = 1 (the optimizer kernels run);
//   otherwise step_ok = 0: the optimizer kernels return at once and the BN
//     running statistics are copied back from before the step. The first
//     faulty step also sets `halted`, which keeps every later step of the
//     execution from changing anything, so the host can hand those batches
//     in again (on_nan: skip_step) or stop with the last good weights.
#include <cmath>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace convoy::cuda {
namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__global__ void begin_step_kernel(DeviceScalars* s) {
  s->step_loss_sum = 0;
  s->step_correct = 0;
  s->nonfinite = 0;
}

__global__ void flag_nonfinite_kernel(const float* g, int64_t n, DeviceScalars* s) {
  bool bad = false;
  GRID_STRIDE(i, n) bad |= !isfinite(g[i]);
  if (bad) atomicOr(&s->nonfinite, 1);
}

__global__ void commit_step_kernel(int64_t batch, DeviceScalars* s) {
  const bool finite = s->nonfinite == 0 && isfinite(s->step_loss_sum);
  if (s->halted || !finite) {
    s->step_ok = 0;
    if (!s->halted) {
      s->halted = 1;
      s->steps_run += 1;  // the faulty step counts as run
    }
    return;
  }
  s->step_ok = 1;
  s->steps_run += 1;
  s->steps_done += 1;  // dropout's next mask, as the CPU's next_step() after an update
  s->loss_sum += s->step_loss_sum;
  s->correct += s->step_correct;
  s->train_examples += static_cast<unsigned long long>(batch);
}

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
