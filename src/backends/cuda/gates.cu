// Dropout and multiply: x times a mask or a gate (see kernels.h). Dropout's
// mask is the CPU's, element for element (dropout_mask.h): the products are
// single float multiplies, so outputs and gradients are the CPU's bits.
#include "backends/dropout_mask.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace convoy::cuda {
namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// out = in * mask, the mask drawn per element. Used forward (in = x) and
// backward (in = dy): the step count does not change in between.
__global__ void dropout_kernel(DropoutArgs a, const float* in, float* out) {
  const int64_t step = *a.steps_done;
  GRID_STRIDE(i, a.batch * a.example) {
    const int64_t n = i / a.example, j = i - n * a.example;
    const uint64_t stream = dropout_example_stream(a.seed, step, a.batch, n);
    const float mask = dropout_drops(stream, dropout_cpu_index(j, a.channels, a.pixels), a.rate) ? 0.0f : a.keep_scale;
    out[i] = __fmul_rn(in[i], mask);
  }
}

__global__ void gate_forward_kernel(const float* x, const float* g, float* y, int64_t gates, int64_t pixels) {
  GRID_STRIDE(i, gates * pixels) y[i] = __fmul_rn(x[i], g[i / pixels]);
}

// Element-wise gates: nothing to sum.
__global__ void gate_backward_elementwise_kernel(const float* x, const float* g, const float* dy, float* dx,
                                                 float* dg, int64_t n) {
  GRID_STRIDE(i, n) {
    if (dx) dx[i] = __fmul_rn(dy[i], g[i]);
    if (dg) dg[i] = __fmul_rn(dy[i], x[i]);
  }
}

// Per-channel gates: one warp per gate, summing dy * x over its pixels (a
// fixed order: the same bits every run). The gate index is the same for a
// whole warp, so its shuffles stay complete.
constexpr int kWarpsPerBlock = kThreads / 32;

__global__ void gate_backward_channels_kernel(const float* x, const float* g, const float* dy, float* dx, float* dg,
                                              int64_t gates, int64_t pixels) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t{gridDim.x} * kWarpsPerBlock;
  for (int64_t r = blockIdx.x * int64_t{kWarpsPerBlock} + threadIdx.x / 32; r < gates; r += warps) {
    const float gate = g[r];
    const int64_t row = r * pixels;
    float sum = 0;
    for (int64_t p = lane; p < pixels; p += 32) {
      if (dx) dx[row + p] = __fmul_rn(dy[row + p], gate);
      sum += dy[row + p] * x[row + p];
    }
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0 && dg) dg[r] = sum;
  }
}

}  // namespace

void dropout_forward(const DropoutArgs& a, const float* x, float* y, cudaStream_t stream) {
  const int64_t n = a.batch * a.example;
  dropout_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, x, y);
  CUDA_CHECK_LAUNCH("dropout_kernel (forward)");
}

void dropout_backward(const DropoutArgs& a, const float* dy, float* dx, cudaStream_t stream) {
  const int64_t n = a.batch * a.example;
  dropout_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, dy, dx);
  CUDA_CHECK_LAUNCH("dropout_kernel (backward)");
}

void gate_forward(const float* x, const float* g, float* y, int64_t gates, int64_t pixels, cudaStream_t stream) {
  gate_forward_kernel<<<blocks_for(gates * pixels), kThreads, 0, stream>>>(x, g, y, gates, pixels);
  CUDA_CHECK_LAUNCH("gate_forward_kernel");
}

void gate_backward(const float* x, const float* g, const float* dy, float* dx, float* dg, int64_t gates,
                   int64_t pixels, cudaStream_t stream) {
  if (!dx && !dg) return;
  if (pixels == 1) {
    gate_backward_elementwise_kernel<<<blocks_for(gates), kThreads, 0, stream>>>(x, g, dy, dx, dg, gates);
    CUDA_CHECK_LAUNCH("gate_backward_elementwise_kernel");
    return;
  }
  const auto blocks =
      static_cast<unsigned>(std::clamp<int64_t>((gates + kWarpsPerBlock - 1) / kWarpsPerBlock, 1, 4096));
  gate_backward_channels_kernel<<<blocks, kThreads, 0, stream>>>(x, g, dy, dx, dg, gates, pixels);
  CUDA_CHECK_LAUNCH("gate_backward_channels_kernel");
}

}  // namespace convoy::cuda
