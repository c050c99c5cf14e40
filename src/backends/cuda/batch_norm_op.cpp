// Batch normalisation on cuDNN (spatial mode: one mean and variance per
// channel over N*H*W; a [N, F] input is [N, F, 1, 1]). PyTorch's semantics:
// training normalises with the batch's biased variance and moves the running
// statistics by `momentum` (cuDNN's exponentialAverageFactor:
// r = (1 - momentum) r + momentum * stat) with the unbiased variance, as
// PyTorch, which calls these same functions; inference uses the running
// statistics. The forward pass saves the batch mean and inverse deviation
// for the backward pass in the op's own memory.
//
// Synchronised (ctx.sync_batch_norm set: replicas with --sync-bn), training
// steps use convoy's own kernels instead (sync_batch_norm.cu): cuDNN keeps
// its sums to itself, and these must be summed over replicas between the
// passes. They follow the CPU op step for step: the sums, then the centred
// squares, each summed over replicas; in backward gamma and beta keep this
// batch's gradients (the gradient average completes them) and the two sums
// for the input gradient are summed over replicas.
// Frozen (trainable = false), as the CPU's: inference in training steps too,
// running statistics untouched, no parameter gradients (they stay zero), and
// dx = gamma / sqrt(running_var + eps) * dy (own kernel, frozen.cu).
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/cudnn_descriptors.h"
#include "backends/cuda/sync_batch_norm.h"
#include "backends/cuda/kernels.h"
#include "backends/device_reducer.h"

namespace convoy::cuda {
namespace {

class BatchNormOp final : public CudaOp {
 public:
  BatchNormOp(const nn::BatchNorm& bn, const Shape& in, bool trainable)
      : bn_(bn), trainable_(trainable), n_(in[0]), c_(in[1]), pixels_(in.size() == 4 ? in[2] * in[3] : 1),
        shape_{.n = in[0], .c = in[1], .spatial = in.size() == 4 ? in[2] * in[3] : 1} {
    set_nchw(x_, in[0], in[1], in.size() == 4 ? in[2] : 1, in.size() == 4 ? in[3] : 1);
    CUDA_CHECK(cudnnDeriveBNTensorDescriptor(stats_, x_, CUDNN_BATCHNORM_SPATIAL));
  }

  // Doubles first (the synchronised path's sums), then floats.
  std::size_t private_bytes() const override { return sizeof(double) * (6 * c_ + 3) + sizeof(float) * 8 * c_; }

  void bind(CudaContext& ctx, const OpBuffers& b) override {
    b_ = b;
    double* d = static_cast<double*>(b.own);
    sums_ = d;                 // [C + 1]: channel sums, rows
    squares_ = sums_ + c_ + 1;  // [C + 1]
    mean_ = squares_ + c_ + 1;  // [C]
    inv_std_ = mean_ + c_;      // [C]
    sums2_ = inv_std_ + c_;     // [2C + 1]
    float* f = reinterpret_cast<float*>(sums2_ + 2 * c_ + 1);
    saved_mean_ = f;
    saved_inv_std_ = f + c_;
    scale_ = f + 2 * c_;
    center_ = f + 3 * c_;
    shift_ = f + 4 * c_;
    coefficients_ = f + 5 * c_;  // [3C]
    if (!trainable_) CUDA_CHECK(cudaMemsetAsync(b.grads, 0, sizeof(float) * 2 * c_, ctx.stream));
  }

  // params: gamma [C] then beta [C]; state: running mean [C] then running variance [C].
  void forward(CudaContext& ctx, bool training) override {
    float *gamma = b_.params, *beta = b_.params + c_, *mean = b_.state, *var = b_.state + c_;
    // A frozen layer never synchronises: it uses its running statistics.
    if (training) synchronised_ = trainable_ && ctx.sync_batch_norm != nullptr;
    if (training && synchronised_)
      synchronised_forward(ctx);
    else if (training && trainable_)
      CUDA_CHECK(cudnnBatchNormalizationForwardTraining(ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_,
                                                        b_.src, x_, b_.dst, stats_, gamma, beta, bn_.momentum, mean,
                                                        var, bn_.eps, saved_mean_, saved_inv_std_));
    else
      CUDA_CHECK(cudnnBatchNormalizationForwardInference(ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, x_,
                                                         b_.src, x_, b_.dst, stats_, gamma, beta, mean, var,
                                                         bn_.eps));
  }

  void backward(CudaContext& ctx) override {
    if (!trainable_) {
      // The scale goes where the saved inverse deviation would (unused when frozen).
      if (b_.diff_src)
        frozen_batch_norm_backward(b_.params, b_.state + c_, bn_.eps, b_.diff_dst, b_.diff_src, saved_inv_std_, n_,
                                   c_, pixels_, ctx.stream);
      return;
    }
    if (synchronised_) return synchronised_backward(ctx);
    // cuDNN always writes the input gradient; an unwanted one goes to `discard`.
    float* dx = b_.diff_src ? b_.diff_src : b_.discard;
    CUDA_CHECK(cudnnBatchNormalizationBackward(ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x_,
                                               b_.src, x_, b_.diff_dst, x_, dx, stats_, b_.params, b_.grads,
                                               b_.grads + c_, bn_.eps, saved_mean_, saved_inv_std_));
  }

 private:
  void synchronised_forward(CudaContext& ctx) {
    cudaStream_t st = ctx.stream;
    bn_channel_sums(b_.src, shape_, sums_, st);
    ctx.sync_batch_norm->sum_statistics(sums_, c_ + 1);
    bn_centred_squares(b_.src, shape_, sums_, mean_, squares_, st);
    ctx.sync_batch_norm->sum_statistics(squares_, c_ + 1);
    bn_finish_statistics(sums_, mean_, squares_, b_.params, b_.params + c_, b_.state, b_.state + c_, shape_,
                         bn_.momentum, bn_.eps, inv_std_, scale_, center_, shift_, st);
    bn_normalize(b_.src, b_.dst, shape_, scale_, center_, shift_, st);
  }

  void synchronised_backward(CudaContext& ctx) {
    bn_backward_sums(b_.src, b_.diff_dst, shape_, mean_, inv_std_, sums2_, b_.grads, ctx.stream);
    if (!b_.diff_src) return;  // as the CPU: every replica skips the same sum
    ctx.sync_batch_norm->sum_statistics(sums2_, 2 * c_ + 1);
    bn_input_gradient(b_.src, b_.diff_dst, b_.diff_src, shape_, sums2_, sums_, b_.params, inv_std_, center_,
                      coefficients_, ctx.stream);
  }

  nn::BatchNorm bn_;
  bool trainable_;
  int64_t n_, c_, pixels_;
  BnShape shape_;
  TensorDesc x_, stats_;
  float *saved_mean_ = nullptr, *saved_inv_std_ = nullptr;
  // The synchronised path's buffers (the op's own device memory).
  double *sums_ = nullptr, *squares_ = nullptr, *mean_ = nullptr, *inv_std_ = nullptr, *sums2_ = nullptr;
  float *scale_ = nullptr, *center_ = nullptr, *shift_ = nullptr, *coefficients_ = nullptr;
  bool synchronised_ = false;  // the last training forward was (its backward follows it)
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CudaOp> make_batch_norm(const nn::BatchNorm& bn, const Shape& in, bool trainable) {
  return std::make_unique<BatchNormOp>(bn, in, trainable);
}

}  // namespace convoy::cuda
