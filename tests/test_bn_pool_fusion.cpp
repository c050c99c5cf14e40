// The CPU device's batch norm → ReLU → max pool fusion (a ResNet's stem;
// backends/cpu/conv_pool_op.h, batch_norm_op.cpp) against the same device
// with every layer on its own op: parameters, gradients, optimizer state,
// batch-norm statistics, outputs and metrics bit for bit, for overlapping
// padded pools and disjoint ones, channel counts the pool's vectors divide
// and ones they do not, one and two threads (a thread's rows ending inside
// an image), frozen batch norms, -0, NaN and infinities; and the fixed rule:
// which chains fuse and that `--profile` says where the pool's time went.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convoy/core/threads.h"
#include "fused_device_check.h"

namespace convoy {
namespace {

using namespace nn;
using namespace fused_device_check;

// conv → BN → ReLU → pool, then a classifier on the pooled maps.
Model stem(const Shape& input, int64_t filters, const MaxPool2d& pool) {
  GraphBuilder g(input);
  auto x = g.add(ReLU{}, g.add(BatchNorm{}, g.add(Conv2d{.filters = filters, .kernel = 3, .padding = 1}, g.input())));
  x = g.add(pool, x);
  g.add(Dense{.units = 7}, g.add(Flatten{}, x));
  return g.build();
}

constexpr MaxPool2d kStemPool{.kernel = 3, .stride = 2, .padding = 1};

class BnPoolFusion : public KernelSetTest {};

// Layers: conv2d_0, batch_norm_0, relu_0 / max_pool2d_0 (the fused pair), flatten, dense.
void expect_stem_fused(const Model& model, Executable& exe) {
  const std::vector<std::string> in = runs_in(exe);
  const std::string bn = model.layers()[1].name;
  EXPECT_EQ(in[0], "");
  EXPECT_EQ(in[1], "");
  EXPECT_EQ(in[2], bn);
  EXPECT_EQ(in[3], bn);
}

// 64 channels: whole vectors in every copy (the overlapping windows'
// gradients added a vector at a time); 10: not in the AVX2 and AVX-512
// copies (a channel at a time); 3: fewer than any vector.
TEST_P(BnPoolFusion, OverlappingPaddedPoolsTrainBitForBit) {
  for (int64_t filters : {64, 10, 3}) {
    SCOPED_TRACE(std::to_string(filters) + " channels");
    const Model model = stem({3, 9, 8}, filters, kStemPool);
    const auto o = options_for(set(), 4, Loss::softmax_cross_entropy);
    expect_stem_fused(model, *compile(model, o, true));
    expect_same_training(model, o, 3);
  }
}

// Disjoint 2×2 windows (the pool's row kernels) with an odd size (a row
// and a column no window covers: their gradients +0), and a pool with gaps.
TEST_P(BnPoolFusion, DisjointPoolsTrainBitForBit) {
  for (const MaxPool2d& pool : {MaxPool2d{.kernel = 2}, MaxPool2d{.kernel = 2, .stride = 3}}) {
    const Model model = stem({2, 7, 9}, 12, pool);
    const auto o = options_for(set(), 3, Loss::softmax_cross_entropy);
    expect_stem_fused(model, *compile(model, o, true));
    expect_same_training(model, o, 3);
  }
}

// 5 examples of 9×8 = 360 rows: two threads split the batch norm's rows in
// the middle of example 2, which both threads then route and reduce in part.
TEST_P(BnPoolFusion, BitForBitOnOneAndTwoThreadsAndInBatchSlices) {
  const int threads = num_threads();
  const Model model = stem({3, 9, 8}, 16, kStemPool);
  for (int t : {1, 2}) {
    set_num_threads(t);
    expect_same_training(model, options_for(set(), 5, Loss::softmax_cross_entropy), 2);
  }
  set_num_threads(threads);
  expect_same_training(model, options_for(set(), 6, Loss::softmax_cross_entropy), 2, 2);
}

TEST_P(BnPoolFusion, FrozenBatchNormAndInputGradient) {
  Model model = stem({3, 9, 8}, 16, kStemPool);
  model.set_trainable(false, "batch_norm_0");
  auto o = options_for(set(), 4, Loss::softmax_cross_entropy);
  expect_same_training(model, o, 2);
  // The BN on the model's input: its input gradient is the model's.
  GraphBuilder g({16, 6, 6});
  g.add(Dense{.units = 5}, g.add(Flatten{}, g.add(kStemPool, g.add(ReLU{}, g.add(BatchNorm{}, g.input())))));
  const Model on_input = g.build();
  o.input_gradient = true;
  EXPECT_EQ(runs_in(*compile(on_input, o, true))[2], "batch_norm_0");
  expect_same_training(on_input, o, 2);
}

// The rule: a max pool whose input is a ReLU that is a BN's only reader, and
// the pool the ReLU's only reader. Not: the ReLU's output read by another
// layer too, the BN's output read twice, a pool after an add → ReLU, an
// average pool.
TEST_P(BnPoolFusion, FusesOnlyWhereTheRuleAllows) {
  GraphBuilder g({3, 8, 8});
  const auto conv = g.add(Conv2d{.filters = 8, .kernel = 3, .padding = 1}, g.input());
  const auto relu = g.add(ReLU{}, g.add(BatchNorm{}, conv));                     // read by the pool and the add
  const auto pooled = g.add(kStemPool, relu);                                     // max_pool2d_0
  const auto side = g.add(Conv2d{.filters = 8, .kernel = 3, .stride = 2, .padding = 1}, relu);
  const auto bn = g.add(BatchNorm{}, g.add(Add{}, {pooled, side}));              // read by the ReLU and the add below
  const auto sum = g.add(Add{}, {g.add(ReLU{}, bn), bn});
  const auto joined = g.add(MaxPool2d{.kernel = 2}, g.add(ReLU{}, g.add(Add{}, {sum, sum})));  // add → ReLU → pool
  const auto avg = g.add(AvgPool2d{.kernel = 2}, g.add(ReLU{}, g.add(BatchNorm{}, joined)));   // BN → ReLU → avg
  g.add(Dense{.units = 6}, g.add(Flatten{}, avg));
  const Model model = g.build();
  const auto o = options_for(set(), 4, Loss::softmax_cross_entropy);
  auto exe = compile(model, o, true);
  const std::vector<std::string> in = runs_in(*exe);
  const auto& layers = model.layers();
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const bool relu_after_bn = std::holds_alternative<ReLU>(layers[i].layer) &&
                               std::holds_alternative<BatchNorm>(layers[static_cast<std::size_t>(layers[i].inputs[0])].layer) &&
                               layers[i].name != "relu_1";  // the BN read twice: not fused
    const bool relu_after_add = std::holds_alternative<ReLU>(layers[i].layer) &&
                                std::holds_alternative<Add>(layers[static_cast<std::size_t>(layers[i].inputs[0])].layer);
    const bool fused = relu_after_bn || relu_after_add;
    EXPECT_EQ(in[i].empty(), !fused) << layers[i].name << " runs in '" << in[i] << "'";
  }
  expect_same_training(model, o, 2);
}

// -0, NaN and ±inf through a BN → ReLU → pool on the model's input: ties in
// every window of BN channel 1 (y = beta), a NaN channel (the ReLU makes its
// values +0 and passes their gradients), infinite inputs.
TEST_P(BnPoolFusion, SignedZerosNaNAndInfinitiesAsTheUnfusedOps) {
  GraphBuilder g({4, 5, 5});
  g.add(Dense{.units = 6}, g.add(Flatten{}, g.add(kStemPool, g.add(ReLU{}, g.add(BatchNorm{}, g.input())))));
  const Model model = g.build();
  expect_same_through_special_values(model, set(), [](Executable& fused) {
    EXPECT_EQ(runs_in(fused)[2], "batch_norm_0");
  });
}

INSTANTIATE_TEST_SUITE_P(KernelSets, BnPoolFusion,
                         ::testing::Values(KernelSet::base, KernelSet::avx2, KernelSet::avx512),
                         [](const auto& info) { return std::string(kernel_set_name(info.param)); });

}  // namespace
}  // namespace convoy
