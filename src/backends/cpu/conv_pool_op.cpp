#include "backends/cpu/conv_pool_op.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "backends/cpu/fused_away_op.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/planar_conv.h"

namespace convoy::cpu {
namespace {

// What the fused layers' ops learn at bind time, read by the head's passes:
// the pool's and the ReLU's buffers (their layers bind after the head's).
struct Chain {
  OpBuffers pool, relu;
  bool has_relu = false;
  // The chain's output and its gradient: the last member's.
  const OpBuffers& last() const { return has_relu ? relu : pool; }
};

// The convolution of a fused chain, running the pool (and ReLU) too. Its
// parameters and their gradients are the convolution's, laid out as
// Conv2dOp's (PyTorch's weight, then the bias); its own output buffer and
// output gradient stay unused.
class ConvPoolOp final : public CpuOp {
 public:
  ConvPoolOp(std::unique_ptr<PlanarConv> conv, int64_t weights, int64_t biases, bool trainable,
             std::shared_ptr<Chain> chain)
      : conv_(std::move(conv)), weights_(weights), biases_(biases), bias_(biases > 0), trainable_(trainable),
        chain_(std::move(chain)),
        positions_(static_cast<std::size_t>(conv_->positions_size())) {}

  void bind(DnnlEnv&, const OpBuffers& b) override {
    if (b.diff_src) throw std::logic_error("a fused conv -> pool was bound with an input gradient");
    b_ = b;
    if (!trainable_) std::fill_n(b.grads, weights_ + biases_, 0.0f);  // as WeightedOp: a frozen layer's stay zero
  }

  void forward(DnnlEnv&, bool) override {
    conv_->forward_pooled(b_.src, b_.params, bias_ ? b_.params + weights_ : nullptr, chain_->last().dst,
                          positions_.data());
  }

  void backward(DnnlEnv&) override {
    if (!trainable_) return;
    conv_->weight_gradient_pooled(b_.src, chain_->last().diff_dst, positions_.data(), b_.grads,
                                  bias_ ? b_.grads + weights_ : nullptr);
  }

 private:
  std::unique_ptr<PlanarConv> conv_;
  int64_t weights_, biases_;
  bool bias_, trainable_;
  std::shared_ptr<Chain> chain_;
  std::vector<uint8_t> positions_;
  OpBuffers b_;
};

// The layers reading each layer's output.
using Readers = std::vector<std::vector<int>>;

Readers readers_of(const nn::Model& model) {
  Readers readers(model.layers().size());
  for (std::size_t j = 0; j < model.layers().size(); ++j)
    for (int in : model.layers()[j].inputs)
      if (in != nn::kModelInput) readers[static_cast<std::size_t>(in)].push_back(static_cast<int>(j));
  return readers;
}

// The sole reader of layer i's output, or -1.
int sole_reader(const Readers& readers, std::size_t i) {
  return readers[i].size() == 1 ? readers[i][0] : -1;
}

// Layer `member`'s work runs in layer `head`'s op, which reads its buffers from `slot`.
void fuse_into(CpuOps& made, int member, std::size_t head, std::shared_ptr<OpBuffers> slot) {
  made.ops[static_cast<std::size_t>(member)] = std::make_unique<FusedAwayOp>(std::move(slot));
  made.runs_in[static_cast<std::size_t>(member)] = static_cast<int>(head);
}

// The fused first block with conv layer i as its head, where the rule allows; true when made.
bool make_conv_pool(const nn::Model& model, const Readers& readers, std::size_t i, int64_t batch, CpuOps& made) {
  const auto& layers = model.layers();
  const nn::LayerPlan& plan = layers[i];
  const int pool = sole_reader(readers, i);
  if (pool < 0 || !std::holds_alternative<nn::Conv2d>(plan.layer) || plan.inputs != std::vector<int>{nn::kModelInput})
    return false;
  const auto* p = std::get_if<nn::MaxPool2d>(&layers[static_cast<std::size_t>(pool)].layer);
  const ConvGeometry g = conv_geometry(plan, with_batch(batch, plan.input_shape), with_batch(batch, plan.output_shape));
  // The pool's output is then [O, Ho / 2, Wo / 2], as the planar pool writes it.
  if (!p || p->kernel != 2 || (p->stride != 0 && p->stride != 2) || p->padding != 0 || !PlanarConv::suits(g))
    return false;
  auto conv = std::make_unique<PlanarConv>(g);
  if (!conv->can_pool_2x2()) return false;
  auto chain = std::make_shared<Chain>();
  const int relu = sole_reader(readers, static_cast<std::size_t>(pool));
  chain->has_relu = relu >= 0 && std::holds_alternative<nn::ReLU>(layers[static_cast<std::size_t>(relu)].layer);
  conv->set_pooling(chain->has_relu);
  const auto& c = std::get<nn::Conv2d>(plan.layer);
  const int64_t weights = g.filters * g.channels * c.kernel * c.kernel;
  fuse_into(made, pool, i, std::shared_ptr<OpBuffers>(chain, &chain->pool));
  if (chain->has_relu) fuse_into(made, relu, i, std::shared_ptr<OpBuffers>(chain, &chain->relu));
  made.ops[i] = std::make_unique<ConvPoolOp>(std::move(conv), weights, c.bias ? g.filters : 0, plan.trainable, chain);
  return true;
}

// Whether layer `pool` (-1: none) is a max pool a batch norm over `shape`
// can run after its ReLU: images ([N, C, H, W]) and a kernel the pool op takes.
bool pools_images(const nn::Model& model, const Shape& shape, int pool) {
  if (pool < 0 || shape.size() != 4) return false;
  const auto* p = std::get_if<nn::MaxPool2d>(&model.layers()[static_cast<std::size_t>(pool)].layer);
  return p && p->kernel <= nn::kMaxPoolLargestKernel;
}

// A batch norm or a two-input add (layer i) with its only reader, a ReLU, fused; true when made.
bool make_with_relu(const nn::Model& model, const Readers& readers, std::size_t i, int64_t batch, CpuOps& made) {
  const nn::LayerPlan& plan = model.layers()[i];
  const int relu = sole_reader(readers, i);
  const bool bn = std::holds_alternative<nn::BatchNorm>(plan.layer);
  if (relu < 0 || !std::holds_alternative<nn::ReLU>(model.layers()[static_cast<std::size_t>(relu)].layer) ||
      !(bn || (std::holds_alternative<nn::Add>(plan.layer) && plan.inputs.size() == 2)))
    return false;
  auto slot = std::make_shared<OpBuffers>();
  fuse_into(made, relu, i, slot);
  const Shape shape = with_batch(batch, plan.input_shape);
  if (!bn) {
    made.ops[i] = make_add_relu(plan, batch, slot);
    return true;
  }
  const int pool = sole_reader(readers, static_cast<std::size_t>(relu));
  if (!pools_images(model, shape, pool)) {
    made.ops[i] = make_batch_norm(plan, shape, slot);
    return true;
  }
  const nn::LayerPlan& pool_plan = model.layers()[static_cast<std::size_t>(pool)];
  auto pool_slot = std::make_shared<OpBuffers>();
  fuse_into(made, pool, i, pool_slot);
  made.ops[i] = make_batch_norm_relu_pool(plan, shape, slot, pool_plan, with_batch(batch, pool_plan.output_shape),
                                          pool_slot);
  return true;
}

// A max pool (layer i) with its only reader, a ReLU, fused; true when made.
bool make_pool_relu(const nn::Model& model, const Readers& readers, std::size_t i, int64_t batch, CpuOps& made) {
  const nn::LayerPlan& plan = model.layers()[i];
  const int relu = sole_reader(readers, i);
  if (relu < 0 || !std::holds_alternative<nn::MaxPool2d>(plan.layer) ||
      !std::holds_alternative<nn::ReLU>(model.layers()[static_cast<std::size_t>(relu)].layer))
    return false;
  auto slot = std::make_shared<OpBuffers>();
  fuse_into(made, relu, i, slot);
  made.ops[i] = make_max_pool2d(plan, with_batch(batch, plan.input_shape), with_batch(batch, plan.output_shape), slot);
  return true;
}

// A batch norm over images (layer i) with its only reader, a flatten, fused; true when made.
bool make_bn_flatten(const nn::Model& model, const Readers& readers, std::size_t i, int64_t batch, CpuOps& made) {
  const nn::LayerPlan& plan = model.layers()[i];
  const int flatten = sole_reader(readers, i);
  const Shape shape = with_batch(batch, plan.input_shape);
  if (flatten < 0 || !std::holds_alternative<nn::BatchNorm>(plan.layer) || shape.size() != 4 ||
      !std::holds_alternative<nn::Flatten>(model.layers()[static_cast<std::size_t>(flatten)].layer))
    return false;
  auto slot = std::make_shared<OpBuffers>();
  fuse_into(made, flatten, i, slot);
  made.ops[i] = make_batch_norm_flatten(plan, shape, slot);
  return true;
}

}  // namespace

CpuOps make_cpu_ops(DnnlEnv& env, const nn::Model& model, int64_t batch, const std::vector<uint64_t>& seeds,
                    ConvAlgo algo, bool input_gradient, bool fuse) {
  const auto& layers = model.layers();
  const Readers readers = readers_of(model);
  CpuOps made;
  made.ops.resize(layers.size());
  made.runs_in.assign(layers.size(), -1);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (made.ops[i]) continue;  // a fused chain's member, made with its head
    if (fuse && !input_gradient && make_conv_pool(model, readers, i, batch, made)) continue;
    if (fuse && make_with_relu(model, readers, i, batch, made)) continue;
    if (fuse && make_pool_relu(model, readers, i, batch, made)) continue;
    if (fuse && make_bn_flatten(model, readers, i, batch, made)) continue;
    made.ops[i] = make_cpu_op(env, layers[i], batch, seeds[i], algo);
  }
  return made;
}

}  // namespace convoy::cpu
