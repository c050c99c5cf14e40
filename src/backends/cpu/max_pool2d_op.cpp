// Max-pool on oneDNN; the forward pass records arg-max positions in a
// workspace that the backward pass scatters through.
//   src [N, C, H, W], dst [N, C, Ho, Wo]
#include "backends/cpu/ops.h"

namespace convoy::cpu {
namespace {

using namespace dnnl;

class MaxPool2dOp final : public CpuOp {
 public:
  MaxPool2dOp(DnnlEnv& env, const nn::MaxPool2d& p, const Shape& in, const Shape& out)
      : src_md_(plain_desc(in)), dst_md_(plain_desc(out)) {
    int64_t stride = p.stride ? p.stride : p.kernel;
    memory::dims strides{stride, stride}, kernel{p.kernel, p.kernel}, pad{0, 0};
    auto attr = env.attr();
    pooling_forward::primitive_desc fwd_pd(
        {prop_kind::forward_training, algorithm::pooling_max, src_md_, dst_md_, strides, kernel, pad, pad}, attr,
        env.engine);
    ws_md_ = fwd_pd.workspace_desc();
    workspace_.resize(ws_md_.get_size());
    fwd_ = Prim(fwd_pd);
    bwd_ = Prim(pooling_backward::primitive_desc(
        {algorithm::pooling_max, src_md_, dst_md_, strides, kernel, pad, pad}, attr, env.engine, fwd_pd));
  }

  std::size_t scratchpad_bytes() const override { return std::max(fwd_.scratchpad_bytes(), bwd_.scratchpad_bytes()); }

  void bind(DnnlEnv& env, const OpBuffers& b) override {
    fwd_.bind(env, DNNL_ARG_SRC, src_md_, b.src);
    fwd_.bind(env, DNNL_ARG_DST, dst_md_, b.dst);
    fwd_.bind(env, DNNL_ARG_WORKSPACE, ws_md_, workspace_.data());
    fwd_.bind_scratchpad(env, b.scratchpad);
    want_diff_src_ = b.diff_src != nullptr;
    if (want_diff_src_) {
      bwd_.bind(env, DNNL_ARG_DIFF_DST, dst_md_, b.diff_dst);
      bwd_.bind(env, DNNL_ARG_DIFF_SRC, src_md_, b.diff_src);
      bwd_.bind(env, DNNL_ARG_WORKSPACE, ws_md_, workspace_.data());
      bwd_.bind_scratchpad(env, b.scratchpad);
    }
  }

  void forward(DnnlEnv& env, bool) override { fwd_.run(env); }
  void backward(DnnlEnv& env) override {
    if (want_diff_src_) bwd_.run(env);
  }

 private:
  memory::desc src_md_, dst_md_, ws_md_;
  std::vector<std::byte> workspace_;  // sized once at compile time
  Prim fwd_, bwd_;
  bool want_diff_src_ = false;
};

}  // namespace

std::unique_ptr<CpuOp> make_max_pool2d(DnnlEnv& env, const nn::MaxPool2d& p, const Shape& in, const Shape& out) {
  return std::make_unique<MaxPool2dOp>(env, p, in, out);
}

}  // namespace convoy::cpu
