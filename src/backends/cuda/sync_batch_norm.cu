// Synchronised batch norm's kernels (see sync_batch_norm.h). Reductions run
// one block per channel with a fixed-shape tree in double, so a given launch
// gives the same bits every time; elementwise passes are grid-stride loops.
#include "backends/cuda/launch.cuh"
#include "backends/cuda/sync_batch_norm.h"

namespace convoy::cuda {
namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// The block's sum of `v` (kThreads threads), valid in thread 0.
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // the buffer may be reused right after
  return total;
}

// Element k (0 <= k < n * spatial) of channel ch.
__device__ int64_t at(BnShape s, int64_t ch, int64_t k) { return (k / s.spatial * s.c + ch) * s.spatial + k % s.spatial; }

__global__ void channel_sums_kernel(const float* x, BnShape s, double* sums) {
  __shared__ double shared[kThreads];
  const int64_t ch = blockIdx.x, rows = s.n * s.spatial;
  double acc = 0;
  for (int64_t k = threadIdx.x; k < rows; k += kThreads) acc += x[at(s, ch, k)];
  const double total = block_sum(acc, shared);
  if (threadIdx.x == 0) {
    sums[ch] = total;
    if (ch == 0) sums[s.c] = static_cast<double>(rows);
  }
}

__global__ void centred_squares_kernel(const float* x, BnShape s, const double* sums, double* mean, double* squares) {
  __shared__ double shared[kThreads];
  const int64_t ch = blockIdx.x, rows = s.n * s.spatial;
  const double m = sums[ch] / sums[s.c];
  double acc = 0;
  for (int64_t k = threadIdx.x; k < rows; k += kThreads) {
    const double d = x[at(s, ch, k)] - m;
    acc += d * d;
  }
  const double total = block_sum(acc, shared);
  if (threadIdx.x == 0) {
    mean[ch] = m;
    squares[ch] = total;
    if (ch == 0) squares[s.c] = static_cast<double>(rows);
  }
}

__global__ void finish_statistics_kernel(const double* sums, const double* mean, const double* squares,
                                         const float* gamma, const float* beta, float* running_mean,
                                         float* running_var, BnShape s, float momentum, float eps, double* inv_std,
                                         float* scale, float* center, float* shift) {
  GRID_STRIDE(ch, s.c) {
    const double count = sums[s.c];
    const double var = squares[ch] / count;
    const double unbias = count > 1 ? count / (count - 1) : 1.0;
    const double m = momentum;
    inv_std[ch] = 1.0 / sqrt(var + eps);
    running_mean[ch] = static_cast<float>((1 - m) * running_mean[ch] + m * mean[ch]);
    running_var[ch] = static_cast<float>((1 - m) * running_var[ch] + m * var * unbias);
    scale[ch] = static_cast<float>(gamma[ch] * inv_std[ch]);
    center[ch] = static_cast<float>(mean[ch]);
    shift[ch] = beta[ch];
  }
}

__global__ void normalize_kernel(const float* x, float* y, BnShape s, const float* scale, const float* center,
                                 const float* shift) {
  GRID_STRIDE(i, s.n * s.c * s.spatial) {
    const int64_t ch = i / s.spatial % s.c;
    y[i] = (x[i] - center[ch]) * scale[ch] + shift[ch];
  }
}

__global__ void backward_sums_kernel(const float* x, const float* dy, BnShape s, const double* mean,
                                     const double* inv_std, double* sums2, float* grads) {
  __shared__ double shared[kThreads];
  const int64_t ch = blockIdx.x, rows = s.n * s.spatial;
  const double m = mean[ch];
  double a = 0, b = 0;
  for (int64_t k = threadIdx.x; k < rows; k += kThreads) {
    const int64_t i = at(s, ch, k);
    const double g = dy[i];
    a += g;
    b += g * (x[i] - m);
  }
  const double sum_a = block_sum(a, shared);
  const double sum_b = block_sum(b, shared);
  if (threadIdx.x == 0) {
    grads[ch] = static_cast<float>(sum_b * inv_std[ch]);
    grads[s.c + ch] = static_cast<float>(sum_a);
    sums2[ch] = sum_a;
    sums2[s.c + ch] = sum_b;
    if (ch == 0) sums2[2 * s.c] = static_cast<double>(rows);
  }
}

// coefficients: k_dy [c], k_x [c], mean_dy [c].
__global__ void input_gradient_coefficients_kernel(const double* sums2, const double* sums, const float* gamma,
                                                   const double* inv_std, BnShape s, float* coefficients) {
  GRID_STRIDE(ch, s.c) {
    const double count = sums[s.c];
    const double g = gamma[ch] * inv_std[ch];
    coefficients[ch] = static_cast<float>(g);
    coefficients[s.c + ch] = static_cast<float>(-g * inv_std[ch] * inv_std[ch] * sums2[s.c + ch] / count);
    coefficients[2 * s.c + ch] = static_cast<float>(sums2[ch] / count);
  }
}

__global__ void input_gradient_kernel(const float* x, const float* dy, float* dx, BnShape s, const float* coefficients,
                                      const float* center) {
  GRID_STRIDE(i, s.n * s.c * s.spatial) {
    const int64_t ch = i / s.spatial % s.c;
    dx[i] = coefficients[ch] * (dy[i] - coefficients[2 * s.c + ch]) + coefficients[s.c + ch] * (x[i] - center[ch]);
  }
}

unsigned channel_blocks(BnShape s) { return static_cast<unsigned>(s.c); }
unsigned channel_threads_blocks(BnShape s) { return blocks_for(s.c); }

}  // namespace

void bn_channel_sums(const float* x, BnShape s, double* sums, cudaStream_t stream) {
  channel_sums_kernel<<<channel_blocks(s), kThreads, 0, stream>>>(x, s, sums);
  CUDA_CHECK_LAUNCH("bn_channel_sums");
}

void bn_centred_squares(const float* x, BnShape s, const double* sums, double* mean, double* squares,
                        cudaStream_t stream) {
  centred_squares_kernel<<<channel_blocks(s), kThreads, 0, stream>>>(x, s, sums, mean, squares);
  CUDA_CHECK_LAUNCH("bn_centred_squares");
}

void bn_finish_statistics(const double* sums, const double* mean, const double* squares, const float* gamma,
                          const float* beta, float* running_mean, float* running_var, BnShape s, float momentum,
                          float eps, double* inv_std, float* scale, float* center, float* shift, cudaStream_t stream) {
  finish_statistics_kernel<<<channel_threads_blocks(s), kThreads, 0, stream>>>(
      sums, mean, squares, gamma, beta, running_mean, running_var, s, momentum, eps, inv_std, scale, center, shift);
  CUDA_CHECK_LAUNCH("bn_finish_statistics");
}

void bn_normalize(const float* x, float* y, BnShape s, const float* scale, const float* center, const float* shift,
                  cudaStream_t stream) {
  normalize_kernel<<<blocks_for(s.n * s.c * s.spatial), kThreads, 0, stream>>>(x, y, s, scale, center, shift);
  CUDA_CHECK_LAUNCH("bn_normalize");
}

void bn_backward_sums(const float* x, const float* dy, BnShape s, const double* mean, const double* inv_std,
                      double* sums2, float* grads, cudaStream_t stream) {
  backward_sums_kernel<<<channel_blocks(s), kThreads, 0, stream>>>(x, dy, s, mean, inv_std, sums2, grads);
  CUDA_CHECK_LAUNCH("bn_backward_sums");
}

void bn_input_gradient(const float* x, const float* dy, float* dx, BnShape s, const double* sums2,
                       const double* sums, const float* gamma, const double* inv_std, const float* center,
                       float* coefficients, cudaStream_t stream) {
  input_gradient_coefficients_kernel<<<channel_threads_blocks(s), kThreads, 0, stream>>>(sums2, sums, gamma, inv_std,
                                                                                         s, coefficients);
  CUDA_CHECK_LAUNCH("bn_input_gradient (coefficients)");
  input_gradient_kernel<<<blocks_for(s.n * s.c * s.spatial), kThreads, 0, stream>>>(x, dy, dx, s, coefficients,
                                                                                    center);
  CUDA_CHECK_LAUNCH("bn_input_gradient");
}

}  // namespace convoy::cuda
