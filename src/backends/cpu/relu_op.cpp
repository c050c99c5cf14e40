// ReLU on oneDNN, in the activation layout: dst = max(src, 0), diff_src = diff_dst where src > 0.
#include "backends/cpu/ops.h"

namespace convoy::cpu {
namespace {

using namespace dnnl;

class ReluOp final : public CpuOp {
 public:
  ReluOp(DnnlEnv& env, const Shape& shape) : md_(activation_desc(shape)) {
    auto attr = env.attr();
    eltwise_forward::primitive_desc fwd_pd({prop_kind::forward_training, algorithm::eltwise_relu, md_, 0.f, 0.f},
                                           attr, env.engine);
    fwd_ = Prim(fwd_pd);
    bwd_ = Prim(eltwise_backward::primitive_desc({algorithm::eltwise_relu, md_, md_, 0.f, 0.f}, attr, env.engine,
                                                 fwd_pd));
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

std::unique_ptr<CpuOp> make_relu(DnnlEnv& env, const Shape& shape) { return std::make_unique<ReluOp>(env, shape); }

}  // namespace convoy::cpu
