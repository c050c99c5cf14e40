#pragma once
// The shared shape of a layer with a weight and a bias on oneDNN (Conv2d,
// Dense): forward, backward-weights (+bias), and backward-data only when the
// input gradient is wanted. Subclasses only describe their primitives.
#include <algorithm>

#include "backends/cpu/cpu_op.h"

namespace convoy::cpu {

class WeightedOp : public CpuOp {
 public:
  WeightedOp(dnnl::memory::desc src, dnnl::memory::desc dst, dnnl::memory::desc w, dnnl::memory::desc b)
      : src_md_(src), dst_md_(dst), w_md_(w), b_md_(b) {}

  std::size_t scratchpad_bytes() const override {
    return std::max({fwd_.scratchpad_bytes(), bwd_data_.scratchpad_bytes(), bwd_w_.scratchpad_bytes()});
  }

  void bind(DnnlEnv& env, const OpBuffers& b) override {
    // The flat buffers hold the weight, then the bias.
    const std::size_t w_floats = w_md_.get_size() / sizeof(float);
    fwd_.bind(env, DNNL_ARG_SRC, src_md_, b.src);
    fwd_.bind(env, DNNL_ARG_WEIGHTS, w_md_, b.params);
    fwd_.bind(env, DNNL_ARG_BIAS, b_md_, b.params + w_floats);
    fwd_.bind(env, DNNL_ARG_DST, dst_md_, b.dst);
    fwd_.bind_scratchpad(env, b.scratchpad);
    bwd_w_.bind(env, DNNL_ARG_SRC, src_md_, b.src);
    bwd_w_.bind(env, DNNL_ARG_DIFF_DST, dst_md_, b.diff_dst);
    bwd_w_.bind(env, DNNL_ARG_DIFF_WEIGHTS, w_md_, b.grads);
    bwd_w_.bind(env, DNNL_ARG_DIFF_BIAS, b_md_, b.grads + w_floats);
    bwd_w_.bind_scratchpad(env, b.scratchpad);
    want_diff_src_ = b.diff_src != nullptr;
    if (want_diff_src_) {
      bwd_data_.bind(env, DNNL_ARG_DIFF_DST, dst_md_, b.diff_dst);
      bwd_data_.bind(env, DNNL_ARG_WEIGHTS, w_md_, b.params);
      bwd_data_.bind(env, DNNL_ARG_DIFF_SRC, src_md_, b.diff_src);
      bwd_data_.bind_scratchpad(env, b.scratchpad);
    }
  }

  void forward(DnnlEnv& env, bool) override { fwd_.run(env); }
  void backward(DnnlEnv& env) override {
    bwd_w_.run(env);
    if (want_diff_src_) bwd_data_.run(env);
  }

 protected:
  dnnl::memory::desc src_md_, dst_md_, w_md_, b_md_;
  Prim fwd_, bwd_data_, bwd_w_;

 private:
  bool want_diff_src_ = false;
};

}  // namespace convoy::cpu
