// Log-softmax and the losses with their metrics, following the CPU's
// formulas (backends/cpu/softmax_kernels.cpp) term by term.
#include <cmath>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace convoy::cuda {
namespace {

constexpr int kRowsPerBlock = kThreads / 32;  // log-softmax: one warp per row

__device__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// y = x - logsumexp(x) per row. The row index is the same for a whole warp,
// so a warp leaves together and its shuffles stay complete.
__global__ void log_softmax_forward_kernel(const float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float mx = -INFINITY;
  for (int64_t j = lane; j < cols; j += 32) mx = fmaxf(mx, xr[j]);
  mx = warp_max(mx);
  float sum = 0;
  for (int64_t j = lane; j < cols; j += 32) sum += expf(xr[j] - mx);
  // (x - max) - log(sum), not x - (max + log(sum)): with |x| ~ 1e4 the latter
  // loses the log term's digits (ONNX's test_logsoftmax_large_number; the CPU's form).
  const float log_sum = logf(warp_sum(sum));
  for (int64_t j = lane; j < cols; j += 32) y[row * cols + j] = (xr[j] - mx) - log_sum;
}

// dx = dy - softmax(x) * sum(dy), with softmax(x) = exp(y).
__global__ void log_softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t rows,
                                            int64_t cols) {
  const int64_t row = blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* dyr = dy + row * cols;
  float sum = 0;
  for (int64_t j = lane; j < cols; j += 32) sum += dyr[j];
  sum = warp_sum(sum);
  for (int64_t j = lane; j < cols; j += 32) dx[row * cols + j] = dyr[j] - expf(y[row * cols + j]) * sum;
}

__device__ int64_t row_argmax(const float* x, int64_t cols) {
  int64_t best = 0;
  for (int64_t j = 1; j < cols; ++j)
    if (x[j] > x[best]) best = j;
  return best;
}

__device__ float row_logsumexp(const float* x, int64_t cols) {
  float mx = x[0];
  for (int64_t j = 1; j < cols; ++j) mx = fmaxf(mx, x[j]);
  float sum = 0;
  for (int64_t j = 0; j < cols; ++j) sum += expf(x[j] - mx);
  return mx + logf(sum);
}

// One block; each thread takes rows tid, tid + blockDim, ...; the per-thread
// sums are then combined in a fixed tree (the same bits every run).
__global__ void loss_kernel(LossArgs a) {
  __shared__ double loss_part[kThreads];
  __shared__ unsigned long long correct_part[kThreads];
  const int64_t cols = a.cols;
  const float s = a.smoothing;
  const float inv_n = 1.0f / static_cast<float>(a.grad_rows);
  const float uniform = a.loss == Loss::binary_cross_entropy ? s / 2 : s / static_cast<float>(cols);
  double loss = 0;
  unsigned long long correct = 0;
  for (int64_t row = threadIdx.x; row < a.rows; row += blockDim.x) {
    const float* o = a.out + row * cols;
    float* d = a.d_out ? a.d_out + row * cols : nullptr;
    const float* dense = a.dense ? a.dense + row * cols : nullptr;
    const int64_t label = dense ? -1 : a.labels[row];
    auto target = [&](int64_t j) {  // the smoothed target of class j
      return dense ? dense[j] * (1 - s) + uniform : (j == label ? uniform + (1 - s) : uniform);
    };
    if (a.loss == Loss::binary_cross_entropy) {
      // Stable form: max(o, 0) - o t + log(1 + exp(-|o|)), averaged over classes.
      bool all_right = true;
      double row_loss = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const float t = target(j);
        row_loss += fmaxf(o[j], 0.0f) - o[j] * t + log1pf(expf(-fabsf(o[j])));
        all_right = all_right && ((o[j] > 0) == (dense[j] >= 0.5f));
        if (d) d[j] = (1 / (1 + expf(-o[j])) - t) * inv_n / static_cast<float>(cols);
      }
      loss += row_loss / static_cast<double>(cols);
      correct += all_right;
      continue;
    }
    const int64_t wanted = dense ? row_argmax(dense, cols) : label;
    correct += row_argmax(o, cols) == wanted;
    float t_sum = 0;
    for (int64_t j = 0; j < cols; ++j) t_sum += target(j);
    if (a.loss == Loss::nll) {
      for (int64_t j = 0; j < cols; ++j) loss -= target(j) * o[j];
      if (d)
        for (int64_t j = 0; j < cols; ++j) d[j] = -target(j) * inv_n;
    } else {  // softmax cross-entropy from logits: sum_j t_j (lse - o_j)
      const float lse = row_logsumexp(o, cols);
      for (int64_t j = 0; j < cols; ++j) loss += target(j) * (lse - o[j]);
      if (d)
        for (int64_t j = 0; j < cols; ++j) d[j] = (expf(o[j] - lse) * t_sum - target(j)) * inv_n;
    }
  }
  loss_part[threadIdx.x] = loss;
  correct_part[threadIdx.x] = correct;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss_part[threadIdx.x] += loss_part[threadIdx.x + half];
      correct_part[threadIdx.x] += correct_part[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    if (a.step_loss) *a.step_loss = loss_part[0];
    if (a.loss_sum) *a.loss_sum += loss_part[0];
    if (a.correct) *a.correct += correct_part[0];
  }
}

unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

}  // namespace

void log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows == 0) return;
  log_softmax_forward_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(x, y, rows, cols);
  CUDA_CHECK_LAUNCH("log_softmax_forward_kernel");
}

void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                           cudaStream_t stream) {
  if (rows == 0) return;
  log_softmax_backward_kernel<<<row_blocks(rows), kThreads, 0, stream>>>(y, dy, dx, rows, cols);
  CUDA_CHECK_LAUNCH("log_softmax_backward_kernel");
}

void loss_forward(const LossArgs& args, cudaStream_t stream) {
  loss_kernel<<<1, kThreads, 0, stream>>>(args);
  CUDA_CHECK_LAUNCH("loss_kernel");
}

}  // namespace convoy::cuda
