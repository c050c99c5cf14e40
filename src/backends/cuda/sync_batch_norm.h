#pragma once
// Synchronised batch norm's own kernels (sync_batch_norm.cu). cuDNN's batch
// norm computes its statistics inside one call, so the sums cannot be summed
// over replicas between its passes; with replicas under --sync-bn these
// kernels replace it in training steps, with the CPU's formulas and order
// (backends/cpu/batch_norm_op.cpp): per-channel sums in double, the mean, the
// centred sum of squares, each summed over replicas between the kernels.
// Images are NCHW [n, c, spatial]; a vector [n, c] has spatial = 1.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace convoy::cuda {

struct BnShape {
  int64_t n = 0, c = 0, spatial = 1;
};

// sums[ch] = sum of x over channel ch; sums[c] = this batch's rows (n * spatial).
void bn_channel_sums(const float* x, BnShape s, double* sums, cudaStream_t stream);
// With the summed sums (and global row count sums[c]): mean[ch], and
// squares[ch] = sum of (x - mean)^2 over this batch; squares[c] = its rows.
void bn_centred_squares(const float* x, BnShape s, const double* sums, double* mean, double* squares,
                        cudaStream_t stream);
// With the summed squares: the batch's inverse deviation, the running
// statistics moved by `momentum` (the variance unbiased, as PyTorch), and the
// float coefficients of y = (x - center) * scale + shift.
void bn_finish_statistics(const double* sums, const double* mean, const double* squares, const float* gamma,
                          const float* beta, float* running_mean, float* running_var, BnShape s, float momentum,
                          float eps, double* inv_std, float* scale, float* center, float* shift, cudaStream_t stream);
void bn_normalize(const float* x, float* y, BnShape s, const float* scale, const float* center, const float* shift,
                  cudaStream_t stream);
// Backward, this batch only: grads[ch] (gamma) = inv_std * sum dy * (x - mean),
// grads[c + ch] (beta) = sum dy; and sums2 = [sum dy per channel, sum dy * (x - mean)
// per channel, rows] for the replicas' sum.
void bn_backward_sums(const float* x, const float* dy, BnShape s, const double* mean, const double* inv_std,
                      double* sums2, float* grads, cudaStream_t stream);
// With the summed sums2 and the forward's global row count (sums[c]):
// dx = k_dy * (dy - mean_dy) + k_x * (x - center).
void bn_input_gradient(const float* x, const float* dy, float* dx, BnShape s, const double* sums2,
                       const double* sums, const float* gamma, const double* inv_std, const float* center,
                       float* coefficients, cudaStream_t stream);

}  // namespace convoy::cuda
