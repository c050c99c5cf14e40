// Elementwise kernels and small reductions (see kernels.h for each one's job).
#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace convoy::cuda {
namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__global__ void relu_forward_kernel(const float* x, float* y, int64_t n) {
  GRID_STRIDE(i, n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// As the CPU's: the gradient passes where the input is positive.
__global__ void relu_backward_kernel(const float* x, const float* dy, float* dx, int64_t n) {
  GRID_STRIDE(i, n) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
  GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void accumulate_kernel(float* out, const float* a, int64_t n) {
  GRID_STRIDE(i, n) out[i] += a[i];
}

__global__ void add_bias_rows_kernel(float* y, const float* bias, int64_t rows, int64_t cols) {
  GRID_STRIDE(i, rows * cols) y[i] += bias[i % cols];
}

// Block (32, 8): threadIdx.x picks the column (coalesced reads across a
// warp), threadIdx.y strides over rows; the 8 partial sums are then added in
// a fixed order.
__global__ void column_sums_kernel(const float* x, float* out, int64_t rows, int64_t cols) {
  __shared__ float partial[8][33];
  const int64_t c = blockIdx.x * int64_t{32} + threadIdx.x;
  float sum = 0;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 8) sum += x[r * cols + c];
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0;
    for (int k = 0; k < 8; ++k) total += partial[k][threadIdx.x];
    out[c] = total;
  }
}

__global__ void probe_kernel() {}

}  // namespace

bool kernels_run_here(std::string& why) {
  cudaFuncAttributes attributes;
  const cudaError_t e = cudaFuncGetAttributes(&attributes, probe_kernel);
  if (e == cudaSuccess) return true;
  cudaGetLastError();  // clear it
  why = std::string("this build's GPU code does not run on this GPU (") + cudaGetErrorString(e) +
        "); rebuild with -DCMAKE_CUDA_ARCHITECTURES set for it";
  return false;
}

void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream) {
  relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  CUDA_CHECK_LAUNCH("relu_forward_kernel");
}

void relu_backward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream) {
  relu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, dy, dx, n);
  CUDA_CHECK_LAUNCH("relu_backward_kernel");
}

void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream) {
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, out, n);
  CUDA_CHECK_LAUNCH("add_kernel");
}

void accumulate(float* out, const float* a, int64_t n, cudaStream_t stream) {
  accumulate_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, a, n);
  CUDA_CHECK_LAUNCH("accumulate_kernel");
}

void add_bias_rows(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
  add_bias_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(y, bias, rows, cols);
  CUDA_CHECK_LAUNCH("add_bias_rows_kernel");
}

void column_sums(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (cols == 0) return;
  const auto blocks = static_cast<unsigned>((cols + 31) / 32);
  column_sums_kernel<<<blocks, dim3(32, 8), 0, stream>>>(x, out, rows, cols);
  CUDA_CHECK_LAUNCH("column_sums_kernel");
}

}  // namespace convoy::cuda
