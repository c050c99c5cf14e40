// ReLU6, SiLU and sigmoid, with the CPU backend's derivatives
// (backends/cpu/eltwise_op.cpp); the backward pass reads the forward's input.
//   relu6:   min(max(x, 0), 6)        d = 0 < x < 6
//   silu:    x * sigmoid(x)           d = s + x s (1 - s)
//   sigmoid: s = 1 / (1 + exp(-x))    d = s (1 - s)
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace convoy::cuda {
namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void activation_forward_kernel(Activation a, const float* x, float* y, int64_t n) {
  GRID_STRIDE(i, n) {
    const float v = x[i];
    switch (a) {
      case Activation::relu6: y[i] = fminf(fmaxf(v, 0.0f), 6.0f); break;
      case Activation::silu: y[i] = v * sigmoid(v); break;
      case Activation::sigmoid: y[i] = sigmoid(v); break;
    }
  }
}

__global__ void activation_backward_kernel(Activation a, const float* x, const float* dy, float* dx, int64_t n) {
  GRID_STRIDE(i, n) {
    const float v = x[i];
    float d = 0;
    switch (a) {
      case Activation::relu6: d = v > 0.0f && v < 6.0f ? 1.0f : 0.0f; break;
      case Activation::silu: {
        const float s = sigmoid(v);
        d = s + v * s * (1.0f - s);
        break;
      }
      case Activation::sigmoid: {
        const float s = sigmoid(v);
        d = s * (1.0f - s);
        break;
      }
    }
    dx[i] = dy[i] * d;
  }
}

}  // namespace

void activation_forward(Activation a, const float* x, float* y, int64_t n, cudaStream_t stream) {
  activation_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, x, y, n);
  CUDA_CHECK_LAUNCH("activation_forward_kernel");
}

void activation_backward(Activation a, const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  activation_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, x, dy, dx, n);
  CUDA_CHECK_LAUNCH("activation_backward_kernel");
}

}  // namespace convoy::cuda
