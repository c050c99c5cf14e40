// Conv2d on oneDNN.
//   src [N, C, H, W], weight [O, C, k, k], bias [O], dst [N, O, Ho, Wo]
#include "backends/cpu/ops.h"
#include "backends/cpu/weighted_op.h"

namespace convoy::cpu {
namespace {

using namespace dnnl;

class Conv2dOp final : public WeightedOp {
 public:
  Conv2dOp(DnnlEnv& env, const nn::Conv2d& c, const Shape& in, const Shape& out)
      : WeightedOp(plain_desc(in), plain_desc(out), plain_desc({c.filters, in[1], c.kernel, c.kernel}),
                   plain_desc({c.filters})) {
    memory::dims strides{c.stride, c.stride}, pad{c.padding, c.padding};
    auto attr = env.attr();
    convolution_forward::primitive_desc fwd_pd(
        {prop_kind::forward_training, algorithm::convolution_direct, src_md_, w_md_, b_md_, dst_md_, strides, pad,
         pad},
        attr, env.engine);
    fwd_ = Prim(fwd_pd);
    bwd_data_ = Prim(convolution_backward_data::primitive_desc(
        {algorithm::convolution_direct, src_md_, w_md_, dst_md_, strides, pad, pad}, attr, env.engine, fwd_pd));
    bwd_w_ = Prim(convolution_backward_weights::primitive_desc(
        {algorithm::convolution_direct, src_md_, w_md_, b_md_, dst_md_, strides, pad, pad}, attr, env.engine,
        fwd_pd));
  }
};

}  // namespace

std::unique_ptr<CpuOp> make_conv2d(DnnlEnv& env, const nn::Conv2d& c, const Shape& in, const Shape& out) {
  return std::make_unique<Conv2dOp>(env, c, in, out);
}

}  // namespace convoy::cpu
