// Frozen layers (trainable = false; see kernels.h): a frozen batch norm's
// input gradient, and the packing of the trainable parameters that lets the
// optimizer run over them alone, as the CPU backend does (cpu_executable.cpp,
// plan_updates): its state then covers only them, and weight decay or
// momentum never moves a frozen weight.
#include <cmath>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace convoy::cuda {
namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// The CPU's inference scale: float(gamma * (1 / sqrt(double(var) + eps))),
// in double as there (IEEE division and square root: the same bits).
__global__ void frozen_scale_kernel(const float* gamma, const float* var, float eps, float* scale, int64_t channels) {
  GRID_STRIDE(c, channels) {
    const double inv = 1.0 / sqrt(static_cast<double>(var[c]) + static_cast<double>(eps));
    scale[c] = static_cast<float>(static_cast<double>(gamma[c]) * inv);
  }
}

__global__ void scale_channels_kernel(const float* scale, const float* dy, float* dx, int64_t channels,
                                      int64_t pixels, int64_t n) {
  GRID_STRIDE(i, n) dx[i] = __fmul_rn(scale[(i / pixels) % channels], dy[i]);
}

// The run that packed index j falls in: the last r with packed_begin[r] <= j.
__device__ int64_t run_of(const int64_t* packed_begin, int64_t count, int64_t j) {
  int64_t lo = 0, hi = count - 1;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    if (packed_begin[mid] <= j)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

template <bool Gather>
__global__ void runs_kernel(const float* from, float* to, const int64_t* runs, int64_t count, int64_t packed_n) {
  const int64_t* flat_begin = runs;
  const int64_t* packed_begin = runs + count;
  GRID_STRIDE(j, packed_n) {
    const int64_t r = run_of(packed_begin, count, j);
    const int64_t flat = flat_begin[r] + (j - packed_begin[r]);
    if (Gather)
      to[j] = from[flat];
    else
      to[flat] = from[j];
  }
}

}  // namespace

void frozen_batch_norm_backward(const float* gamma, const float* running_var, float eps, const float* dy, float* dx,
                                float* scale, int64_t batch, int64_t channels, int64_t pixels, cudaStream_t stream) {
  frozen_scale_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(gamma, running_var, eps, scale, channels);
  CUDA_CHECK_LAUNCH("frozen_scale_kernel");
  const int64_t n = batch * channels * pixels;
  scale_channels_kernel<<<blocks_for(n), kThreads, 0, stream>>>(scale, dy, dx, channels, pixels, n);
  CUDA_CHECK_LAUNCH("scale_channels_kernel");
}

void gather_runs(const float* flat, float* packed, const int64_t* runs, int64_t count, int64_t packed_n,
                 cudaStream_t stream) {
  if (packed_n == 0) return;
  runs_kernel<true><<<blocks_for(packed_n), kThreads, 0, stream>>>(flat, packed, runs, count, packed_n);
  CUDA_CHECK_LAUNCH("runs_kernel (gather)");
}

void scatter_runs(const float* packed, float* flat, const int64_t* runs, int64_t count, int64_t packed_n,
                  cudaStream_t stream) {
  if (packed_n == 0) return;
  runs_kernel<false><<<blocks_for(packed_n), kThreads, 0, stream>>>(packed, flat, runs, count, packed_n);
  CUDA_CHECK_LAUNCH("runs_kernel (scatter)");
}

}  // namespace convoy::cuda
