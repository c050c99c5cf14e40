// Dense (inner product) on oneDNN.
//   src [N, K], weight [O, K] (PyTorch's Linear layout), bias [O], dst [N, O]
#include "backends/cpu/ops.h"
#include "backends/cpu/weighted_op.h"

namespace convoy::cpu {
namespace {

using namespace dnnl;

class DenseOp final : public WeightedOp {
 public:
  DenseOp(DnnlEnv& env, const Shape& in, const Shape& out, bool trainable)
      : WeightedOp(env, plain_desc(in), plain_desc(out), plain_desc({out[1], in[1]}), plain_desc({out[1]}),
                   trainable) {
    auto attr = env.attr();
    // fp32 keeps the canonical weight layout (no reorder); bf16 converts anyway, into the layout oneDNN picks.
    const memory::desc w_in = env.compute == memory::data_type::f32 ? w_md_ : any_weights();
    inner_product_forward::primitive_desc fwd_pd({prop_kind::forward_training, src_in_md_, w_in, b_md_, dst_md_},
                                                 attr, env.engine);
    set_primitives(fwd_pd,
                   inner_product_backward_data::primitive_desc({src_md_, w_in, diff_dst_in_md_}, attr, env.engine,
                                                               fwd_pd),
                   inner_product_backward_weights::primitive_desc({src_in_md_, w_md_, b_md_, diff_dst_in_md_}, attr,
                                                                  env.engine, fwd_pd));
  }
};

}  // namespace

std::unique_ptr<CpuOp> make_dense(DnnlEnv& env, const nn::LayerPlan& plan, const Shape& in, const Shape& out) {
  return std::make_unique<DenseOp>(env, in, out, plan.trainable);
}

}  // namespace convoy::cpu
