// The CPU device's batch norm → ReLU and add → ReLU fusion
// (backends/cpu/conv_pool_op.h) against the same device with every layer on
// its own op: ResNet-like nets and a plain conv → BN → ReLU CNN train to the
// same parameters, gradients, optimizer state, batch-norm statistics, outputs
// and metrics bit for bit, on one and two threads, in batch slices, frozen,
// with -0, NaN and infinities on the way, in every kernel copy this CPU runs
// (the others are skipped, named). And the fixed rule: which layers fuse and
// that `--profile` says where the ReLUs' time went.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convoy/core/threads.h"
#include "convoy/nn/zoo.h"
#include "fused_device_check.h"

namespace convoy {
namespace {

using namespace nn;
using namespace fused_device_check;

// A basic residual block as torchvision's: conv → BN → ReLU → conv → BN,
// plus the input (or a strided 1×1 conv → BN of it), → ReLU.
GraphBuilder::Ref block(GraphBuilder& g, GraphBuilder::Ref x, int64_t planes, int64_t stride, bool project) {
  GraphBuilder::Ref y = g.add(Conv2d{.filters = planes, .kernel = 3, .stride = stride, .padding = 1, .bias = false}, x);
  y = g.add(ReLU{}, g.add(BatchNorm{}, y));
  y = g.add(BatchNorm{}, g.add(Conv2d{.filters = planes, .kernel = 3, .padding = 1, .bias = false}, y));
  GraphBuilder::Ref shortcut = x;
  if (project) shortcut = g.add(BatchNorm{}, g.add(Conv2d{.filters = planes, .kernel = 1, .stride = stride, .bias = false}, x));
  return g.add(ReLU{}, g.add(Add{}, {y, shortcut}));
}

// A stem (conv → BN → ReLU → 3×3/2 max pool), an identity block and a
// projecting one, global pooling, a classifier: ResNet-18 in small.
Model small_resnet() {
  GraphBuilder g({3, 12, 12});
  auto x = g.add(ReLU{}, g.add(BatchNorm{}, g.add(Conv2d{.filters = 8, .kernel = 3, .padding = 1, .bias = false}, g.input())));
  x = g.add(MaxPool2d{.kernel = 3, .stride = 2, .padding = 1}, x);
  x = block(g, x, 8, 1, false);
  x = block(g, x, 16, 2, true);
  g.add(Dense{.units = 10}, g.add(GlobalAvgPool{}, x));
  return g.build();
}

// conv → BN → ReLU twice, then a BN → ReLU over vectors (rows = examples).
Model plain_cnn() {
  return Sequential({3, 10, 10}, {Conv2d{.filters = 12, .kernel = 3}, BatchNorm{}, ReLU{}, MaxPool2d{.kernel = 2},
                                  Conv2d{.filters = 10, .kernel = 3, .padding = 1}, BatchNorm{}, ReLU{}, Flatten{},
                                  Dense{.units = 20}, BatchNorm{}, ReLU{}, Dense{.units = 10}, LogSoftmax{}});
}

// Per layer: fused into the layer before it (every ReLU after a BN or an add), or not.
void expect_relus_fused(const Model& model, Executable& exe) {
  const std::vector<std::string> in = runs_in(exe);
  const auto& layers = model.layers();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const bool relu = std::holds_alternative<ReLU>(layers[i].layer);
    EXPECT_EQ(in[i], relu ? layers[static_cast<std::size_t>(layers[i].inputs[0])].name : "") << layers[i].name;
  }
}

class ReluFusion : public KernelSetTest {};

TEST_P(ReluFusion, SmallResNetFusesEveryReluAndTrainsBitForBit) {
  const Model model = small_resnet();
  const auto o = options_for(set(), 6, Loss::softmax_cross_entropy);
  expect_relus_fused(model, *compile(model, o, true));
  for (const std::string& s : runs_in(*compile(model, o, false))) EXPECT_EQ(s, "");
  expect_same_training(model, o, 3);
}

// Each thread count splits the batch norms' rows differently; 5 examples leave threads unequal shares.
TEST_P(ReluFusion, BitForBitOnOneAndTwoThreads) {
  const int threads = num_threads();
  for (int t : {1, 2}) {
    set_num_threads(t);
    expect_same_training(small_resnet(), options_for(set(), 5, Loss::softmax_cross_entropy), 2);
    expect_same_training(plain_cnn(), options_for(set(), 5), 2);
  }
  set_num_threads(threads);
}

TEST_P(ReluFusion, PlainCnnWithInputGradientAndBatchSlices) {
  const Model model = plain_cnn();
  auto o = options_for(set(), 8);
  expect_relus_fused(model, *compile(model, o, true, 2));
  expect_same_training(model, o, 3, 2);
  o.input_gradient = true;
  expect_same_training(model, o, 2);
}

TEST_P(ReluFusion, ResNet18BitForBit) {
  const Model model = resnet18({.input = {3, 16, 16}, .classes = 5});
  const auto o = options_for(set(), 2, Loss::softmax_cross_entropy);
  expect_relus_fused(model, *compile(model, o, true));
  expect_same_training(model, o, 1);
}

// A frozen batch norm normalises with its running statistics in training
// too; its backward pass is dx = scale * (masked) dy.
TEST_P(ReluFusion, FrozenBatchNorms) {
  Model model = plain_cnn();
  for (const char* bn : {"batch_norm_0", "batch_norm_2"}) model.set_trainable(false, bn);
  const auto o = options_for(set(), 8);
  expect_relus_fused(model, *compile(model, o, true));
  expect_same_training(model, o, 2);
}

// The ReLU's output read twice (by a conv and by the join), and the model's
// output itself: the fused op writes it as the ReLU's own op does.
TEST_P(ReluFusion, ReluOutputReadTwiceOrTheModelOutput) {
  GraphBuilder g({2, 6, 6});
  const auto r = g.add(ReLU{}, g.add(BatchNorm{}, g.add(Conv2d{.filters = 4, .kernel = 3, .padding = 1}, g.input())));
  const auto c = g.add(Conv2d{.filters = 4, .kernel = 3, .padding = 1}, r);
  g.add(ReLU{}, g.add(BatchNorm{}, g.add(Flatten{}, g.add(Add{}, {r, c}))));
  const Model model = g.build();
  const auto o = options_for(set(), 7, Loss::softmax_cross_entropy);
  const std::vector<std::string> in = runs_in(*compile(model, o, true));
  EXPECT_EQ(in[2], "batch_norm_0");
  EXPECT_EQ(in[4], "");  // add_0: its reader is the flatten
  EXPECT_EQ(in.back(), "batch_norm_1");
  expect_same_training(model, o, 3);
}

// The rule: only a BN or a two-input add whose only reader is a plain ReLU.
TEST_P(ReluFusion, FusesOnlyWhereTheRuleAllows) {
  const auto o = options_for(set(), 4);
  GraphBuilder g({2, 6, 6});
  const auto bn = g.add(BatchNorm{}, g.add(Conv2d{.filters = 3, .kernel = 3}, g.input()));
  const auto relu = g.add(ReLU{}, bn);                 // the BN's output also read by the add
  const auto sum = g.add(Add{}, {relu, bn, relu});     // three inputs
  const auto six = g.add(ReLU6{}, g.add(BatchNorm{}, g.add(ReLU{}, sum)));  // a ReLU6 after a BN
  g.add(LogSoftmax{}, g.add(Dense{.units = 10}, g.add(Flatten{}, six)));
  const Model model = g.build();
  for (const std::string& s : runs_in(*compile(model, o, true))) EXPECT_EQ(s, "");
  expect_same_training(model, o, 2);
}

// -0, NaN and ±inf through a BN → ReLU on the model's input and an add →
// ReLU of the input and a conv of it (one input gradient unwanted): the
// fused masks give oneDNN's bits, in the gradients and the input gradient.
TEST_P(ReluFusion, SignedZerosNaNAndInfinitiesAsTheReluOp) {
  GraphBuilder g({4, 5, 5});
  const auto bn = g.add(ReLU{}, g.add(BatchNorm{}, g.input()));
  const auto sum = g.add(ReLU{}, g.add(Add{}, {g.input(), g.add(Conv2d{.filters = 4, .kernel = 3, .padding = 1}, bn)}));
  g.add(Dense{.units = 6}, g.add(Flatten{}, sum));
  const Model model = g.build();
  for (bool input_gradient : {false, true}) {
    auto o = options_for(set(), 6, Loss::softmax_cross_entropy);
    o.input_gradient = input_gradient;
    auto fused = compile(model, o, true), unfused = compile(model, o, false);
    const std::vector<std::string> in = runs_in(*fused);
    EXPECT_EQ(in[1], "batch_norm_0");
    EXPECT_EQ(in[4], "add_0");
    // BN channel 1: gamma 0 (y = beta exactly: +0, then -0.5); channel 2: beta -inf.
    std::vector<float> params = model.initial_parameters(3);
    params[1] = 0.0f;
    params[4 + 1] = 0.0f;
    params[4 + 2] = -std::numeric_limits<float>::infinity();
    // A NaN in example 0, channel 3 (that channel's statistics are NaN, its
    // ReLU passes every gradient) and a -0; later ±inf (NaN losses, NaN gradients).
    std::vector<float> x = images(model, 6, 11);
    x[3 * 25 + 7] = std::numeric_limits<float>::quiet_NaN();
    x[25 * 4 + 2] = -0.0f;
    const std::vector<int32_t> y = labels(6, 6);
    for (int round = 0; round < 3; ++round) {
      if (round == 1) params[4 + 1] = -0.5f;
      if (round == 2) x[25 * 4 + 3] = -std::numeric_limits<float>::infinity(), x[25 * 8 + 4] = -x[25 * 4 + 3];
      fused->internals().write(Held::parameters, params);
      unfused->internals().write(Held::parameters, params);
      fused->internals().loss_and_gradients(x.data(), y.data());
      unfused->internals().loss_and_gradients(x.data(), y.data());
      const std::string when = "in round " + std::to_string(round) + (input_gradient ? " with" : " without") +
                               " the input gradient";
      for (Held h : {Held::gradients, Held::output}) expect_same_bits(*fused, *unfused, h, when);
      if (input_gradient) expect_same_bits(*fused, *unfused, Held::input_gradient, when);
      if (round == 0) {
        const std::vector<float> g = fused->internals().copy_of(Held::gradients);
        EXPECT_TRUE(std::isnan(g[3]) && std::isfinite(g[4 + 3])) << "BN channel 3: NaN gamma gradient, finite beta's";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KernelSets, ReluFusion,
                         ::testing::Values(KernelSet::base, KernelSet::avx2, KernelSet::avx512),
                         [](const auto& info) { return std::string(kernel_set_name(info.param)); });

}  // namespace
}  // namespace convoy
