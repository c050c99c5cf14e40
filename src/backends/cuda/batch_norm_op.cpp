// Batch normalisation on cuDNN (spatial mode: one mean and variance per
// channel over N*H*W; a [N, F] input is [N, F, 1, 1]). PyTorch's semantics:
// training normalises with the batch's biased variance and moves the running
// statistics by `momentum` (cuDNN's exponentialAverageFactor:
// r = (1 - momentum) r + momentum * stat) with the unbiased variance, as
// PyTorch, which calls these same functions; inference uses the running
// statistics. The forward pass saves the batch mean and inverse deviation
// for the backward pass in the op's own memory.
// Frozen (trainable = false), as the CPU's: inference in training steps too,
// running statistics untouched, no parameter gradients (they stay zero), and
// dx = gamma / sqrt(running_var + eps) * dy (own kernel, frozen.cu).
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/cudnn_descriptors.h"
#include "backends/cuda/kernels.h"

namespace convoy::cuda {
namespace {

class BatchNormOp final : public CudaOp {
 public:
  BatchNormOp(const nn::BatchNorm& bn, const Shape& in, bool trainable)
      : bn_(bn), trainable_(trainable), n_(in[0]), c_(in[1]), pixels_(in.size() == 4 ? in[2] * in[3] : 1) {
    set_nchw(x_, in[0], in[1], in.size() == 4 ? in[2] : 1, in.size() == 4 ? in[3] : 1);
    CUDA_CHECK(cudnnDeriveBNTensorDescriptor(stats_, x_, CUDNN_BATCHNORM_SPATIAL));
  }

  std::size_t private_bytes() const override { return 2 * c_ * sizeof(float); }

  void bind(CudaContext& ctx, const OpBuffers& b) override {
    b_ = b;
    saved_mean_ = static_cast<float*>(b.own);
    saved_inv_std_ = saved_mean_ + c_;
    if (!trainable_) CUDA_CHECK(cudaMemsetAsync(b.grads, 0, sizeof(float) * 2 * c_, ctx.stream));
  }

  // params: gamma [C] then beta [C]; state: running mean [C] then running variance [C].
  void forward(CudaContext& ctx, bool training) override {
    float *gamma = b_.params, *beta = b_.params + c_, *mean = b_.state, *var = b_.state + c_;
    if (training && trainable_)
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
    // cuDNN always writes the input gradient; an unwanted one goes to `discard`.
    float* dx = b_.diff_src ? b_.diff_src : b_.discard;
    CUDA_CHECK(cudnnBatchNormalizationBackward(ctx.cudnn, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, &kOne, &kZero, x_,
                                               b_.src, x_, b_.diff_dst, x_, dx, stats_, b_.params, b_.grads,
                                               b_.grads + c_, bn_.eps, saved_mean_, saved_inv_std_));
  }

 private:
  nn::BatchNorm bn_;
  bool trainable_;
  int64_t n_, c_, pixels_;
  TensorDesc x_, stats_;
  float *saved_mean_ = nullptr, *saved_inv_std_ = nullptr;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CudaOp> make_batch_norm(const nn::BatchNorm& bn, const Shape& in, bool trainable) {
  return std::make_unique<BatchNormOp>(bn, in, trainable);
}

}  // namespace convoy::cuda
