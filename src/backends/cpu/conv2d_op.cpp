// Conv2d on oneDNN, activations in NHWC, weights in whatever layout the
// primitive prefers (see WeightedOp).
//   src [N, C, H, W], weight [O, C, k, k], bias [O], dst [N, O, Ho, Wo]
#include "backends/cpu/ops.h"
#include "backends/cpu/weighted_op.h"

namespace convoy::cpu {
namespace {

using namespace dnnl;

class Conv2dOp final : public WeightedOp {
 public:
  Conv2dOp(DnnlEnv& env, const nn::Conv2d& c, const Shape& in, const Shape& out)
      : WeightedOp(activation_desc(in), activation_desc(out), plain_desc({c.filters, in[1], c.kernel, c.kernel}),
                   plain_desc({c.filters})) {
    memory::dims strides{c.stride, c.stride}, pad{c.padding, c.padding};
    const memory::desc any_w(w_md_.dims(), memory::data_type::f32, memory::format_tag::any);
    auto attr = env.attr();
    convolution_forward::primitive_desc fwd_pd(
        {prop_kind::forward_training, algorithm::convolution_direct, src_md_, any_w, b_md_, dst_md_, strides, pad,
         pad},
        attr, env.engine);
    set_primitives(fwd_pd,
                   convolution_backward_data::primitive_desc(
                       {algorithm::convolution_direct, src_md_, any_w, dst_md_, strides, pad, pad}, attr, env.engine,
                       fwd_pd),
                   convolution_backward_weights::primitive_desc(
                       {algorithm::convolution_direct, src_md_, any_w, b_md_, dst_md_, strides, pad, pad}, attr,
                       env.engine, fwd_pd));
  }
};

}  // namespace

std::unique_ptr<CpuOp> make_conv2d(DnnlEnv& env, const nn::Conv2d& c, const Shape& in, const Shape& out) {
  return std::make_unique<Conv2dOp>(env, c, in, out);
}

}  // namespace convoy::cpu
