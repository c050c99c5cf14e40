// Conv2d on oneDNN, activations in NHWC, weights in whatever layout the
// primitive prefers (see WeightedOp). Grouped and depthwise convolutions are
// oneDNN's grouped weights: PyTorch's [O, C/G, k, k] is, in memory, oneDNN's
// goihw [G, O/G, C/G, k, k]. "same" padding may be asymmetric (left/right).
// A stride-1 convolution of a single-channel image runs its forward pass and
// weight gradient on our own kernels (see planar_conv.h); 3×3 stride-1 pad-1
// convolutions may run any pass by Winograd F(2×2, 3×3) or F(4×4, 3×3) (winograd_conv.h);
// other stride-1 convolutions of few channels, by our direct kernels
// (direct_conv.h); convolutions of stride 2 or more (1×1, or wider to maps of
// over 4 pixels), as one GEMM over the output pixels' patches
// (strided_gemm_conv.h); other wide ones with output maps of at most 16
// pixels, as GEMMs over the batch (small_map_conv.h). In bf16 on an AMX CPU oneDNN's AMX
// kernels take the passes amx_passes.h names, the others run as in fp32.
//   src [N, C, H, W], weight [O, C/G, k, k], bias [O] (optional), dst [N, O, Ho, Wo]
#include <memory>

#include "backends/cpu/amx_passes.h"
#include "backends/cpu/direct_conv.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/planar_conv.h"
#include "backends/cpu/small_map_conv.h"
#include "backends/cpu/strided_gemm_conv.h"
#include "backends/cpu/weighted_op.h"
#include "backends/cpu/winograd_conv.h"

namespace convoy::cpu {
namespace {

using namespace dnnl;

// `own`'s passes less those AMX takes.
template <class Passes>
Passes without(const ConvPasses& amx, Passes own) {
  own.forward = own.forward && !amx.forward;
  own.input_gradient = own.input_gradient && !amx.input_gradient;
  own.weight_gradient = own.weight_gradient && !amx.weight_gradient;
  return own;
}

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
    // bf16 on AMX: oneDNN's AMX kernels run the passes amx_passes() names in
    // bf16; every other pass runs as in fp32, on our Winograd, direct or
    // small-map kernels where `automatic` picks them, else on oneDNN's fp32
    // kernels. `winograd` and `direct` keep every pass as without AMX.
    // Single-channel first convolutions stay on PlanarConv (fused with their pool).
    const bool on_amx = algo == ConvAlgo::automatic && env.bf16_on_amx();
    const ConvPasses amx = on_amx ? amx_passes(g) : ConvPasses{};
    const auto type = [&](bool amx_takes) { return on_amx && !amx_takes ? memory::data_type::f32 : env.compute; };
    const memory::data_type fwd_type = type(amx.forward), data_type = type(amx.input_gradient),
                            weights_type = type(amx.weight_gradient);
    const memory::desc fwd_src = retyped(src_md_, fwd_type), data_diff_dst = retyped(dst_md_, data_type),
                       weights_src = retyped(src_md_, weights_type), weights_diff_dst = retyped(dst_md_, weights_type);
    const memory::desc any_dw = any_weight_gradient();
    const auto attr = env.attr();
    const auto alg = algorithm::convolution_direct;
    auto fwd_desc = has_bias() ? convolution_forward::desc(prop_kind::forward_training, alg, fwd_src,
                                                           any_weights(fwd_type), b_md_, dst_md_, strides, pad_l, pad_r)
                               : convolution_forward::desc(prop_kind::forward_training, alg, fwd_src,
                                                           any_weights(fwd_type), dst_md_, strides, pad_l, pad_r);
    convolution_forward::primitive_desc fwd_pd(fwd_desc, attr, env.engine);
    const convolution_backward_data::primitive_desc bwd_data_pd(
        {alg, src_md_, any_weights(data_type), data_diff_dst, strides, pad_l, pad_r}, attr, env.engine, fwd_pd);
    if (PlanarConv::suits(g)) {
      set_own_kernels(fwd_pd, bwd_data_pd, std::make_unique<PlanarConv>(g));
      return;
    }
    auto bwd_w_desc = has_bias() ? convolution_backward_weights::desc(alg, weights_src, any_dw, b_md_,
                                                                      weights_diff_dst, strides, pad_l, pad_r)
                                 : convolution_backward_weights::desc(alg, weights_src, any_dw, weights_diff_dst,
                                                                      strides, pad_l, pad_r);
    const convolution_backward_weights::primitive_desc bwd_w_pd(bwd_w_desc, attr, env.engine, fwd_pd);
    const ConvPasses every{true, true, true};
    // Strided ones first: a 3×3 stride-2 conv to a map of 5–16 pixels suits both, and the patches' one GEMM
    // beat the small-map GEMMs over the batch (strided_gemm_conv.h).
    if (const ConvPasses passes = StridedGemmConv::chosen(g, algo) ? without(amx, every) : ConvPasses{};
        passes.any()) {
      set_primitives_and_own_kernels(fwd_pd, bwd_data_pd, bwd_w_pd, std::make_unique<StridedGemmConv>(g, passes));
      return;
    }
    if (const ConvPasses passes = SmallMapConv::chosen(g, algo) ? without(amx, every) : ConvPasses{}; passes.any()) {
      set_primitives_and_own_kernels(fwd_pd, bwd_data_pd, bwd_w_pd, std::make_unique<SmallMapConv>(g, passes));
      return;
    }
    if (const WinogradPasses passes = without(amx, WinogradConv::passes(g, algo)); passes.any()) {
      set_primitives_and_own_kernels(fwd_pd, bwd_data_pd, bwd_w_pd, std::make_unique<WinogradConv>(g, passes));
      return;
    }
    if (const DirectPasses passes = without(amx, DirectConv::passes(g, algo)); passes.any()) {
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
