// Element-wise activations on oneDNN's eltwise primitives, in the activation
// layout; the backward pass reads the forward's input.
//   relu:    max(x, 0)                d = x > 0
//   relu6:   min(max(x, 0), 6)        d = 0 < x < 6 (clip_v2: PyTorch's hardtanh mask)
//   silu:    x * sigmoid(x)           d = s + x s (1 - s)
//   sigmoid: s = 1 / (1 + exp(-x))    d = s (1 - s)
#include "backends/cpu/ops.h"

namespace convoy::cpu {
namespace {

using namespace dnnl;

struct Eltwise {
  algorithm alg;
  float alpha = 0, beta = 0;
};

Eltwise eltwise_of(const nn::Layer& layer) {
  if (std::holds_alternative<nn::ReLU6>(layer)) return {algorithm::eltwise_clip_v2, 0.f, 6.f};
  if (std::holds_alternative<nn::SiLU>(layer)) return {algorithm::eltwise_swish, 1.f};
  if (std::holds_alternative<nn::Sigmoid>(layer)) return {algorithm::eltwise_logistic};
  return {algorithm::eltwise_relu};
}

class EltwiseOp final : public CpuOp {
 public:
  EltwiseOp(DnnlEnv& env, Eltwise e, const Shape& shape) : md_(activation_desc(shape)) {
    auto attr = env.attr();
    eltwise_forward::primitive_desc fwd_pd({prop_kind::forward_training, e.alg, md_, e.alpha, e.beta}, attr,
                                           env.engine);
    fwd_ = Prim(fwd_pd);
    bwd_ = Prim(eltwise_backward::primitive_desc({e.alg, md_, md_, e.alpha, e.beta}, attr, env.engine, fwd_pd));
  }

  std::size_t scratchpad_bytes() const override { return std::max(fwd_.scratchpad_bytes(), bwd_.scratchpad_bytes()); }

  void bind(DnnlEnv& env, const OpBuffers& b) override {
    fwd_.bind(env, DNNL_ARG_SRC, md_, b.src);
    fwd_.bind(env, DNNL_ARG_DST, md_, b.dst);
    fwd_.bind_scratchpad(env, b.scratchpad);
    want_diff_src_ = b.diff_src != nullptr;
    if (want_diff_src_) {
      bwd_.bind(env, DNNL_ARG_SRC, md_, b.src);
      bwd_.bind(env, DNNL_ARG_DIFF_DST, md_, b.diff_dst);
      bwd_.bind(env, DNNL_ARG_DIFF_SRC, md_, b.diff_src);
      bwd_.bind_scratchpad(env, b.scratchpad);
    }
  }

  void forward(DnnlEnv& env, bool) override { fwd_.run(env); }
  void backward(DnnlEnv& env) override {
    if (want_diff_src_) bwd_.run(env);
  }

 private:
  memory::desc md_;
  Prim fwd_, bwd_;
  bool want_diff_src_ = false;
};

}  // namespace

std::unique_ptr<CpuOp> make_eltwise(DnnlEnv& env, const nn::Layer& layer, const Shape& shape) {
  return std::make_unique<EltwiseOp>(env, eltwise_of(layer), shape);
}

}  // namespace convoy::cpu
