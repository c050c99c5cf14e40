// Conv2d on oneDNN, activations in NHWC, weights in whatever layout the
// primitive prefers (see WeightedOp). Grouped and depthwise convolutions are
// oneDNN's grouped weights: PyTorch's [O, C/G, k, k] is, in memory, oneDNN's
// goihw [G, O/G, C/G, k, k]. "same" padding may be asymmetric (left/right).
// A stride-1 convolution of a single-channel image runs its forward pass and
// weight gradient on our own kernels (see planar_conv.h); 3×3 stride-1 pad-1
// convolutions may run any pass by Winograd F(2×2, 3×3) or F(4×4, 3×3) (winograd_conv.h);
// other stride-1 convolutions of few channels, by our direct kernels
// (direct_conv.h); wide ones with output maps of at most 4 pixels, as GEMMs
// over the batch (small_map_conv.h).
//   src [N, C, H, W], weight [O, C/G, k, k], bias [O] (optional), dst [N, O, Ho, Wo]
#include <memory>

#include "backends/cpu/direct_conv.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/planar_conv.h"
#include "backends/cpu/small_map_conv.h"
#include "backends/cpu/weighted_op.h"
#include "backends/cpu/winograd_conv.h"

namespace convoy::cpu {
namespace {

using namespace dnnl;

memory::desc weight_desc(const nn::Conv2d& c, int64_t channels) {
  if (c.groups == 1) return plain_desc({c.filters, channels, c.kernel, c.kernel});
  return {{c.groups, c.filters / c.groups, channels / c.groups, c.kernel, c.kernel}, memory::data_type::f32,
          memory::format_tag::goihw};
}

class Conv2dOp final : public WeightedOp {
 public:
  Conv2dOp(DnnlEnv& env, const nn::LayerPlan& plan, const nn::Conv2d& c, const Shape& in, const Shape& out,
           ConvAlgo algo)
      : WeightedOp(env, activation_desc(in), activation_desc(out), weight_desc(c, in[1]),
                   c.bias ? plain_desc({c.filters}) : memory::desc(), plan.trainable) {
    const nn::Window wy = nn::window(in[2], c.kernel, c.stride, c.padding, plan.name);
    const nn::Window wx = nn::window(in[3], c.kernel, c.stride, c.padding, plan.name);
    const memory::dims strides{c.stride, c.stride}, pad_l{wy.pad_begin, wx.pad_begin}, pad_r{wy.pad_end, wx.pad_end};
    const ConvGeometry g = conv_geometry(plan, in, out);
    const memory::desc any_w = any_weights(), any_dw = any_weight_gradient();
    const auto attr = env.attr();
    const auto alg = algorithm::convolution_direct;
    auto fwd_desc = has_bias() ? convolution_forward::desc(prop_kind::forward_training, alg, src_in_md_, any_w,
                                                           b_md_, dst_md_, strides, pad_l, pad_r)
                               : convolution_forward::desc(prop_kind::forward_training, alg, src_in_md_, any_w,
                                                           dst_md_, strides, pad_l, pad_r);
    convolution_forward::primitive_desc fwd_pd(fwd_desc, attr, env.engine);
    const convolution_backward_data::primitive_desc bwd_data_pd(
        {alg, src_md_, any_w, diff_dst_in_md_, strides, pad_l, pad_r}, attr, env.engine, fwd_pd);
    if (PlanarConv::suits(g)) {
      set_own_kernels(fwd_pd, bwd_data_pd, std::make_unique<PlanarConv>(g));
      return;
    }
    auto bwd_w_desc = has_bias() ? convolution_backward_weights::desc(alg, src_in_md_, any_dw, b_md_,
                                                                      diff_dst_in_md_, strides, pad_l, pad_r)
                                 : convolution_backward_weights::desc(alg, src_in_md_, any_dw, diff_dst_in_md_,
                                                                      strides, pad_l, pad_r);
    const convolution_backward_weights::primitive_desc bwd_w_pd(bwd_w_desc, attr, env.engine, fwd_pd);
    if (SmallMapConv::chosen(g, algo)) {
      set_primitives_and_own_kernels(fwd_pd, bwd_data_pd, bwd_w_pd, std::make_unique<SmallMapConv>(g));
      return;
    }
    if (const WinogradPasses passes = WinogradConv::passes(g, algo); passes.any()) {
      set_primitives_and_own_kernels(fwd_pd, bwd_data_pd, bwd_w_pd, make_winograd_conv(g, passes));
      return;
    }
    if (const DirectPasses passes = DirectConv::passes(g, algo); passes.any()) {
      set_primitives_and_own_kernels(fwd_pd, bwd_data_pd, bwd_w_pd, std::make_unique<DirectConv>(g, passes));
      return;
    }
    set_primitives(fwd_pd, bwd_data_pd, bwd_w_pd);
  }
};

}  // namespace

ConvGeometry conv_geometry(const nn::LayerPlan& plan, const Shape& in, const Shape& out) {
  const auto& c = std::get<nn::Conv2d>(plan.layer);
  const nn::Window wy = nn::window(in[2], c.kernel, c.stride, c.padding, plan.name);
  const nn::Window wx = nn::window(in[3], c.kernel, c.stride, c.padding, plan.name);
  return {.batch = in[0], .channels = in[1], .height = in[2], .width = in[3], .filters = out[1],
          .out_height = out[2], .out_width = out[3], .kernel = c.kernel, .stride = c.stride,
          .groups = c.groups, .pad_top = wy.pad_begin, .pad_left = wx.pad_begin};
}

std::unique_ptr<CpuOp> make_conv2d(DnnlEnv& env, const nn::LayerPlan& plan, const Shape& in, const Shape& out,
                                   ConvAlgo algo) {
  return std::make_unique<Conv2dOp>(env, plan, std::get<nn::Conv2d>(plan.layer), in, out, algo);
}

}  // namespace convoy::cpu
