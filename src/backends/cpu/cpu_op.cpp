#include "backends/cpu/cpu_op.h"

#include "backends/cpu/ops.h"

namespace convoy::cpu {
namespace {

// Flatten of a vector is a view; of an image it is a reorder from the NHWC
// activation layout to C-major order, so a following Dense sees features in
// torch.flatten's order.
class FlattenOp final : public CpuOp {
 public:
  explicit FlattenOp(const Shape& in) : in_(in) {}
  bool is_view() const override { return in_.size() == 2; }
  void bind(DnnlEnv& env, const OpBuffers& b) override {
    if (is_view()) return;
    to_flat_ = Prim::reorder(env, activation_desc(in_), b.src, plain_desc(in_), b.dst);
    if (b.diff_src) from_flat_ = Prim::reorder(env, plain_desc(in_), b.diff_dst, activation_desc(in_), b.diff_src);
  }
  void forward(DnnlEnv& env, bool) override {
    if (to_flat_) to_flat_.run(env);
  }
  void backward(DnnlEnv& env) override {
    if (from_flat_) from_flat_.run(env);
  }

 private:
  Shape in_;
  Prim to_flat_, from_flat_;
};

}  // namespace

Shape with_batch(int64_t batch, const Shape& shape) {
  Shape full{batch};
  full.insert(full.end(), shape.begin(), shape.end());
  return full;
}

std::unique_ptr<CpuOp> make_cpu_op(DnnlEnv& env, const nn::LayerPlan& plan, int64_t batch, uint64_t seed,
                                   ConvAlgo algo) {
  const Shape in = with_batch(batch, plan.input_shape), out = with_batch(batch, plan.output_shape);
  const nn::Layer& layer = plan.layer;
  if (std::holds_alternative<nn::Conv2d>(layer)) return make_conv2d(env, plan, in, out, algo);
  if (std::holds_alternative<nn::MaxPool2d>(layer)) return make_max_pool2d(plan, in, out);
  if (std::holds_alternative<nn::AvgPool2d>(layer)) return make_avg_pool2d(plan, in, out);
  if (std::holds_alternative<nn::GlobalAvgPool>(layer)) return make_global_avg_pool(in);
  if (std::holds_alternative<nn::Dropout>(layer)) return make_dropout(plan, batch, seed);
  if (std::holds_alternative<nn::ReLU>(layer) || std::holds_alternative<nn::ReLU6>(layer) ||
      std::holds_alternative<nn::SiLU>(layer) || std::holds_alternative<nn::Sigmoid>(layer))
    return make_eltwise(env, layer, in);
  if (std::holds_alternative<nn::BatchNorm>(layer)) return make_batch_norm(plan, in);
  if (std::holds_alternative<nn::Flatten>(layer)) return std::make_unique<FlattenOp>(in);
  if (std::holds_alternative<nn::Dense>(layer)) return make_dense(env, plan, in, out);
  if (std::holds_alternative<nn::LogSoftmax>(layer)) return make_log_softmax(in);
  if (std::holds_alternative<nn::Multiply>(layer)) return make_multiply(plan, batch);
  if (std::holds_alternative<nn::Clip>(layer)) return make_clip(plan, batch);
  if (std::holds_alternative<nn::Affine>(layer)) return make_affine(plan, batch);
  if (nn::arity(layer) == nn::kManyInputs) return make_join(plan, batch);
  throw std::logic_error(std::string("CPU backend has no kernel for layer ") + plan.name);
}

}  // namespace convoy::cpu
