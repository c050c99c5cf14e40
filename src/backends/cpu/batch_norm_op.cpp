// Batch normalisation on oneDNN, PyTorch's semantics.
//   x [N, C, H, W] or [N, C]; scale (gamma) [C], shift (beta) [C]
//   training:  y = gamma * (x - mean_B) / sqrt(var_B + eps) + beta, with the
//              batch's biased variance, and running stats updated with the
//              unbiased one: r = (1 - momentum) r + momentum * stat
//   inference: the same with the running mean and variance
#include "backends/cpu/ops.h"

namespace convoy::cpu {
namespace {

using namespace dnnl;

class BatchNormOp final : public CpuOp {
 public:
  BatchNormOp(DnnlEnv& env, const nn::BatchNorm& bn, const Shape& shape)
      : bn_(bn), channels_(shape[1]), per_channel_(numel(shape) / shape[1]), md_(plain_desc(shape)),
        stat_md_(plain_desc({shape[1]})), mean_(channels_), var_(channels_) {
    auto attr = env.attr();
    const auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    batch_normalization_forward::primitive_desc train_pd({prop_kind::forward_training, md_, bn.eps, flags}, attr,
                                                         env.engine);
    train_ = Prim(train_pd);
    infer_ = Prim(batch_normalization_forward::primitive_desc(
        {prop_kind::forward_inference, md_, bn.eps, flags | normalization_flags::use_global_stats}, attr,
        env.engine));
    bwd_ = Prim(batch_normalization_backward::primitive_desc({prop_kind::backward, md_, md_, bn.eps, flags}, attr,
                                                             env.engine, train_pd));
  }

  std::size_t scratchpad_bytes() const override {
    return std::max({train_.scratchpad_bytes(), infer_.scratchpad_bytes(), bwd_.scratchpad_bytes()});
  }

  void bind(DnnlEnv& env, const OpBuffers& b) override {
    const float *scale = b.params, *shift = b.params + channels_;
    running_mean_ = b.state;
    running_var_ = b.state + channels_;
    for (Prim* fwd : {&train_, &infer_}) {
      fwd->bind(env, DNNL_ARG_SRC, md_, b.src);
      fwd->bind(env, DNNL_ARG_DST, md_, b.dst);
      fwd->bind(env, DNNL_ARG_SCALE, stat_md_, scale);
      fwd->bind(env, DNNL_ARG_SHIFT, stat_md_, shift);
      fwd->bind_scratchpad(env, b.scratchpad);
    }
    train_.bind(env, DNNL_ARG_MEAN, stat_md_, mean_.data());
    train_.bind(env, DNNL_ARG_VARIANCE, stat_md_, var_.data());
    infer_.bind(env, DNNL_ARG_MEAN, stat_md_, running_mean_);
    infer_.bind(env, DNNL_ARG_VARIANCE, stat_md_, running_var_);

    float* diff_src = b.diff_src;
    if (!diff_src) {  // first layer without input gradient: oneDNN still writes one
      unused_diff_src_ = AlignedBuffer(md_.get_size() / sizeof(float));
      diff_src = unused_diff_src_.data();
    }
    bwd_.bind(env, DNNL_ARG_SRC, md_, b.src);
    bwd_.bind(env, DNNL_ARG_MEAN, stat_md_, mean_.data());
    bwd_.bind(env, DNNL_ARG_VARIANCE, stat_md_, var_.data());
    bwd_.bind(env, DNNL_ARG_DIFF_DST, md_, b.diff_dst);
    bwd_.bind(env, DNNL_ARG_SCALE, stat_md_, scale);
    bwd_.bind(env, DNNL_ARG_SHIFT, stat_md_, shift);  // unused, but oneDNN 2.6 rejects the call without it
    bwd_.bind(env, DNNL_ARG_DIFF_SRC, md_, diff_src);
    bwd_.bind(env, DNNL_ARG_DIFF_SCALE, stat_md_, b.grads);
    bwd_.bind(env, DNNL_ARG_DIFF_SHIFT, stat_md_, b.grads + channels_);
    bwd_.bind_scratchpad(env, b.scratchpad);
  }

  void forward(DnnlEnv& env, bool training) override {
    if (!training) return infer_.run(env);
    train_.run(env);
    const float m = bn_.momentum;
    const float unbias = per_channel_ > 1 ? static_cast<float>(per_channel_) / (per_channel_ - 1) : 1.0f;
    for (int64_t c = 0; c < channels_; ++c) {
      running_mean_[c] = (1 - m) * running_mean_[c] + m * mean_.data()[c];
      running_var_[c] = (1 - m) * running_var_[c] + m * var_.data()[c] * unbias;
    }
  }

  void backward(DnnlEnv& env) override { bwd_.run(env); }

 private:
  nn::BatchNorm bn_;
  int64_t channels_, per_channel_;  // per_channel_: elements averaged per channel (N*H*W)
  memory::desc md_, stat_md_;
  AlignedBuffer mean_, var_;  // the last training batch's statistics, for backward
  AlignedBuffer unused_diff_src_;
  float* running_mean_ = nullptr;
  float* running_var_ = nullptr;
  Prim train_, infer_, bwd_;
};

}  // namespace

std::unique_ptr<CpuOp> make_batch_norm(DnnlEnv& env, const nn::BatchNorm& bn, const Shape& shape) {
  return std::make_unique<BatchNormOp>(env, bn, shape);
}

}  // namespace convoy::cpu
