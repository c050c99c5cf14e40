// The CPU device's batch norm → ReLU and add → ReLU fusion
// (backends/cpu/conv_pool_op.h) against the same device with every layer on
// its own op: ResNet-like nets and a plain conv → BN → ReLU CNN train to the
// same parameters, gradients, optimizer state, batch-norm statistics, outputs
// and metrics bit for bit, on one and two threads, in batch slices, frozen,
// with -0, NaN and infinities on the way, in every kernel copy this CPU runs
// (the others are skipped, named). And the fixed rule: which layers fuse and
// that `--profile` says where the ReLUs' time went.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convoy/core/threads.h"
#include "convoy/nn/zoo.h"
#include "backends/cpu/relu_math.h"
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

// Per layer: fused into the layer before it (every ReLU after a BN or an
// add), or not; a max pool after a BN's ReLU runs in that BN too
// (test_bn_pool_fusion.cpp).
void expect_relus_fused(const Model& model, Executable& exe) {
  const std::vector<std::string> in = runs_in(exe);
  const auto& layers = model.layers();
  auto input_of = [&](std::size_t i) { return static_cast<std::size_t>(layers[i].inputs[0]); };
  for (std::size_t i = 0; i < layers.size(); ++i) {
    std::string expected;
    if (std::holds_alternative<ReLU>(layers[i].layer)) expected = layers[input_of(i)].name;
    if (std::holds_alternative<MaxPool2d>(layers[i].layer) && std::holds_alternative<ReLU>(layers[input_of(i)].layer) &&
        std::holds_alternative<BatchNorm>(layers[input_of(input_of(i))].layer))
      expected = layers[input_of(input_of(i))].name;
    EXPECT_EQ(in[i], expected) << layers[i].name;
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
  expect_same_through_special_values(model, set(), [](Executable& fused) {
    const std::vector<std::string> in = runs_in(fused);
    EXPECT_EQ(in[1], "batch_norm_0");
    EXPECT_EQ(in[4], "add_0");
  });
}

INSTANTIATE_TEST_SUITE_P(KernelSets, ReluFusion,
                         ::testing::Values(KernelSet::base, KernelSet::avx2, KernelSet::avx512),
                         [](const auto& info) { return std::string(kernel_set_name(info.param)); });

// The fused ops' ReLU backward takes its 0/1 from x's bits (relu_math.h says
// why); it must be the float comparison's !(x <= 0) for every x: zeros of
// both signs, denormals, infinities and NaNs of both signs with any payload.
// Every 4093rd bit pattern (a prime stride: every exponent, many mantissas)
// and each boundary, with dy of every kind.
TEST(ReluMath, TheBackwardIsTheComparisonsMaskForEveryKindOfInput) {
  std::vector<uint32_t> patterns = {0x00000000u, 0x80000000u, 0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu,
                                    0x00800000u, 0x80800000u, 0x3f800000u, 0xbf800000u, 0x7f7fffffu, 0xff7fffffu,
                                    0x7f800000u, 0xff800000u, 0x7f800001u, 0xff800001u, 0x7fc00000u, 0xffc00000u,
                                    0x7fffffffu, 0xffffffffu};
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4093) patterns.push_back(static_cast<uint32_t>(u));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float dys[] = {1.5f, -1.5f, 0.0f, -0.0f, inf, -inf, nan, 1e-40f};
  int64_t checked = 0;
  for (uint32_t p : patterns) {
    const float x = std::bit_cast<float>(p);
    ASSERT_EQ(cpu::relu_keeps(x), (x <= 0.0f ? 0.0f : 1.0f)) << std::hex << "x bits 0x" << p;
    for (float dy : dys) {
      const float want = dy * (x <= 0.0f ? 0.0f : 1.0f);
      ASSERT_EQ(std::bit_cast<uint32_t>(cpu::relu_backward(x, dy)), std::bit_cast<uint32_t>(want))
          << std::hex << "x bits 0x" << p << ", dy " << dy;
      ++checked;
    }
  }
  EXPECT_GT(checked, 8 * 1000000);
}

}  // namespace
}  // namespace convoy
