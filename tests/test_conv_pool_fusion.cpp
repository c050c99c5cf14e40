// The CPU device's fused first block, conv → max pool 2×2 (→ ReLU)
// (backends/cpu/conv_pool_op.h), against the same device with every layer on
// its own op: training steps, evaluation, batch slices, frozen layers and
// tied maxima give the same parameters, gradients, optimizer state, batch-norm
// statistics and outputs bit for bit, in every kernel copy this CPU runs
// (the others are skipped, named). And the fixed rule: which models fuse,
// which do not, and that `--profile` says where the fused layers' time went.
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

class ConvPoolFusion : public KernelSetTest {};

TEST_P(ConvPoolFusion, SeedCnnFusesItsFirstBlockAndTrainsBitForBit) {
  const Model model = seed_cnn();
  const auto o = options_for(set(), 24);
  auto exe = compile(model, o, true);
  const std::vector<std::string> in = runs_in(*exe);
  EXPECT_EQ(in[0], "");
  EXPECT_EQ(in[1], "conv2d_0");  // max_pool2d_0
  EXPECT_EQ(in[2], "conv2d_0");  // relu_0
  // relu_1 runs in its pool, flatten_0 in batch_norm_1.
  for (std::size_t i = 3; i < in.size(); ++i)
    EXPECT_EQ(in[i], i == 6 ? "max_pool2d_1" : i == 8 ? "batch_norm_1" : "") << model.layers()[i].name;
  for (const std::string& s : runs_in(*compile(model, o, false))) EXPECT_EQ(s, "");
  expect_same_training(model, o, 3);
}

// Each thread count splits the batch differently; 7 leaves threads unequal shares.
TEST_P(ConvPoolFusion, SeedCnnBitForBitOnOneThreadAndOddBatches) {
  const int threads = num_threads();
  set_num_threads(1);
  expect_same_training(seed_cnn(), options_for(set(), 7), 2);
  set_num_threads(threads);
  expect_same_training(seed_cnn(), options_for(set(), 7), 2);
}

TEST_P(ConvPoolFusion, BatchSlicesFuseEachSliceBitForBit) {
  const Model model = seed_cnn();
  const auto o = options_for(set(), 32);
  EXPECT_EQ(runs_in(*compile(model, o, true, 2))[1], "conv2d_0");
  expect_same_training(model, o, 3, 2);
}

// A conv output of 23 × 23: two bands of 12 and 11 rows, so the last row
// and column are no window's (their gradient is zero), with the ReLU.
TEST_P(ConvPoolFusion, UncoveredRowAndColumnAndSeveralBands) {
  const Model model({1, 27, 27}, {Conv2d{.filters = 10, .kernel = 5}, MaxPool2d{.kernel = 2}, ReLU{}, BatchNorm{},
                                  Flatten{}, Dense{.units = 10}, LogSoftmax{}});
  const auto o = options_for(set(), 12);
  EXPECT_EQ(runs_in(*compile(model, o, true))[2], "conv2d_0");
  expect_same_training(model, o, 3);
}

// No ReLU after the pool (only the pool fuses), no bias, fewer filters than
// a register tile, an odd output width (its last column is no window's).
TEST_P(ConvPoolFusion, PoolWithoutReluOrBias) {
  const Model model({1, 14, 17}, {Conv2d{.filters = 6, .kernel = 3, .bias = false}, MaxPool2d{.kernel = 2},
                                  Flatten{}, Dense{.units = 10}, LogSoftmax{}});
  const auto o = options_for(set(), 10);
  const std::vector<std::string> in = runs_in(*compile(model, o, true));
  EXPECT_EQ(in[1], "conv2d_0");
  EXPECT_EQ(in[2], "");  // flatten_0
  expect_same_training(model, o, 3);
}

// The ReLU's output itself is the model's output: the fused ReLU writes
// oneDNN's bits (+0 for every value that is not positive).
TEST_P(ConvPoolFusion, ReluOutputIsOneDnnsBitForBit) {
  const Model model({1, 12, 12}, {Conv2d{.filters = 4, .kernel = 3}, MaxPool2d{.kernel = 2}, ReLU{}, Flatten{}});
  const auto o = options_for(set(), 9, Loss::softmax_cross_entropy);
  auto exe = compile(model, o, true);
  EXPECT_EQ(runs_in(*exe)[2], "conv2d_0");
  const std::vector<float> x = images(model, 9, 5);
  const std::vector<int32_t> y = labels(9, 100);
  exe->internals().loss_and_gradients(x.data(), y.data());
  const std::vector<float> out = exe->internals().copy_of(Held::output);
  int64_t zeros = 0;
  for (float v : out) zeros += v == 0.0f;
  EXPECT_GT(zeros, 50) << "too few negative pool outputs to test the ReLU";
  expect_same_training(model, o, 2);
}

// Every conv weight zero: each window's four outputs are its bias, a tie,
// and the first position must take the gradient (as the unfused pool's).
TEST_P(ConvPoolFusion, TiedMaximaRouteToTheFirstPosition) {
  const Model model = seed_cnn();
  const auto o = options_for(set(), 16);
  auto fused = compile(model, o, true), unfused = compile(model, o, false);
  std::vector<float> params = model.initial_parameters(3);
  std::fill_n(params.begin(), 10 * 25, 0.0f);  // conv2d_0's weight; its bias stays
  fused->internals().write(Held::parameters, params);
  unfused->internals().write(Held::parameters, params);
  const std::vector<float> x = images(model, 16, 8);
  const std::vector<int32_t> y = labels(16, 10);
  fused->internals().loss_and_gradients(x.data(), y.data());
  unfused->internals().loss_and_gradients(x.data(), y.data());
  expect_same_bits(*fused, *unfused, Held::gradients, "with every window tied");
  const std::vector<float> g = fused->internals().copy_of(Held::gradients);
  EXPECT_NE(std::vector<float>(g.begin(), g.begin() + 250), std::vector<float>(250, 0.0f))
      << "the conv's weight gradient is zero: the test routes nothing";
}

// A max pool whose only reader is a ReLU runs that ReLU (conv_pool_op.h)
// where no planar conv runs the pool: after oneDNN's conv (three input
// channels), in batch slices, and on the model's input with -0, NaN, ±inf
// and a window of NaNs, with and without the input gradient: the bits of
// the pool's and the ReLU's own ops.
TEST_P(ConvPoolFusion, PoolRunsTheReluAfterIt) {
  const Model model({3, 12, 12}, {Conv2d{.filters = 6, .kernel = 3}, MaxPool2d{.kernel = 2}, ReLU{}, BatchNorm{},
                                  Flatten{}, Dense{.units = 10}, LogSoftmax{}});
  const auto o = options_for(set(), 9);
  const std::vector<std::string> in = runs_in(*compile(model, o, true));
  EXPECT_EQ(in[1], "");
  EXPECT_EQ(in[2], "max_pool2d_0");
  expect_same_training(model, o, 3);
  expect_same_training(model, options_for(set(), 10), 2, 2);
  const Model on_input({4, 5, 5}, {MaxPool2d{.kernel = 2}, ReLU{}, Flatten{}, Dense{.units = 6}});
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (bool input_gradient : {false, true}) {
    auto p = options_for(set(), 6, Loss::softmax_cross_entropy);
    p.input_gradient = input_gradient;
    auto fused = compile(on_input, p, true), unfused = compile(on_input, p, false);
    EXPECT_EQ(runs_in(*fused)[1], "max_pool2d_0");
    std::vector<float> x = images(on_input, 6, 11);
    for (std::size_t i = 0; i < x.size(); i += 7) x[i] = -std::abs(x[i]);  // some windows all negative
    x[3] = nan, x[8] = -0.0f, x[30] = -inf, x[41] = inf, x[100 + 4 * 6] = -0.0f;
    for (std::size_t i : {200, 204, 220, 224}) x[i] = nan;  // one channel of a whole window, if NHWC
    for (std::size_t i : {300, 301, 305, 306}) x[i] = nan;  // the same, if NCHW
    const std::vector<int32_t> y = labels(6, 6);
    fused->internals().loss_and_gradients(x.data(), y.data());
    unfused->internals().loss_and_gradients(x.data(), y.data());
    const std::string when = input_gradient ? "with the input gradient" : "without the input gradient";
    for (Held h : {Held::gradients, Held::output}) expect_same_bits(*fused, *unfused, h, when);
    if (input_gradient) expect_same_bits(*fused, *unfused, Held::input_gradient, when);
  }
}

// A batch norm over images whose only reader is a flatten writes the
// flatten's C-major output (conv_pool_op.h): maps of 3×3 with 5 channels
// (transposed a float at a time) and of 4×4 with 12 (8 × 8 blocks, the last
// overlapping), trainable and frozen, on one and two threads (unequal
// shares), in batch slices and with the input gradient; a BN → flatten that
// is not the BN's only reader, or over vectors, does not fuse.
TEST_P(ConvPoolFusion, BatchNormRunsTheFlattenAfterIt) {
  const int threads = num_threads();
  for (int64_t filters : {5, 12}) {
    const int64_t side = filters == 5 ? 5 : 6;
    Model model({2, side, side}, {Conv2d{.filters = filters, .kernel = 3}, BatchNorm{}, Flatten{},
                                  Dense{.units = 10}, LogSoftmax{}});
    auto o = options_for(set(), 10);
    EXPECT_EQ(runs_in(*compile(model, o, true))[2], "batch_norm_0");
    for (int t : {1, 2}) {
      set_num_threads(t);
      expect_same_training(model, options_for(set(), 7), 2);
    }
    set_num_threads(threads);
    expect_same_training(model, o, 2, 2);
    o.input_gradient = true;
    expect_same_training(model, o, 2);
    model.set_trainable(false, "batch_norm_0");
    expect_same_training(model, options_for(set(), 10), 2);
  }
  GraphBuilder g({2, 6, 6});
  const auto bn = g.add(BatchNorm{}, g.add(Conv2d{.filters = 4, .kernel = 3}, g.input()));
  const auto flat = g.add(Flatten{}, bn);
  const auto other = g.add(Flatten{}, g.add(MaxPool2d{.kernel = 2}, bn));
  g.add(LogSoftmax{}, g.add(Dense{.units = 10}, g.add(BatchNorm{}, g.add(Add{}, {g.add(Dense{.units = 8}, flat),
                                                                               g.add(Dense{.units = 8}, other)}))));
  const Model two_readers = g.build();
  const auto o = options_for(set(), 6);
  for (const std::string& s : runs_in(*compile(two_readers, o, true))) EXPECT_EQ(s, "");
  expect_same_training(two_readers, o, 2);
}

TEST_P(ConvPoolFusion, FrozenConvFusesAndKeepsZeroGradients) {
  Model model = seed_cnn();
  model.set_trainable(false, "conv2d_0");
  const auto o = options_for(set(), 16);
  EXPECT_EQ(runs_in(*compile(model, o, true))[1], "conv2d_0");
  expect_same_training(model, o, 2);
  auto exe = compile(model, o, true);
  const std::vector<float> x = images(model, 16, 4);
  const std::vector<int32_t> y = labels(16, 10);
  exe->train_step(x.data(), y.data());
  const std::vector<float> g = exe->internals().copy_of(Held::gradients);
  EXPECT_EQ(std::vector<float>(g.begin(), g.begin() + 260), std::vector<float>(260, 0.0f));
}

// The rule: no fusion where the conv's full output or its gradient is
// needed, or for pools the planar kernels do not take.
TEST_P(ConvPoolFusion, FusesOnlyWhereTheRuleAllows) {
  auto fused_anything = [&](const Model& m, CompileOptions o) {
    for (const std::string& s : runs_in(*compile(m, o, true)))
      if (!s.empty()) return true;
    return false;
  };
  auto o = options_for(set(), 8);
  const Model seed = seed_cnn();
  o.input_gradient = true;
  const std::vector<std::string> with_input_gradient = runs_in(*compile(seed, o, true));
  EXPECT_EQ(with_input_gradient[1], "") << "with the input gradient wanted, the conv runs no pool";
  EXPECT_EQ(with_input_gradient[2], "max_pool2d_0") << "the pool still runs its ReLU";
  o.input_gradient = false;
  EXPECT_FALSE(fused_anything(Model({1, 28, 28}, {Conv2d{.filters = 10, .kernel = 5}, MaxPool2d{.kernel = 3},
                                                   Flatten{}, Dense{.units = 10}, LogSoftmax{}}),
                              o))
      << "a 3x3 pool";
  EXPECT_FALSE(fused_anything(Model({1, 28, 28}, {Conv2d{.filters = 10, .kernel = 5},
                                                   MaxPool2d{.kernel = 2, .stride = 1}, Flatten{},
                                                   Dense{.units = 10}, LogSoftmax{}}),
                              o))
      << "overlapping windows";
  EXPECT_FALSE(fused_anything(Model({3, 28, 28}, {Conv2d{.filters = 10, .kernel = 5}, MaxPool2d{.kernel = 2},
                                                   Flatten{}, Dense{.units = 10}, LogSoftmax{}}),
                              o))
      << "three input channels (oneDNN's conv)";
  // The conv's output read twice: by the pool and by a join.
  GraphBuilder g({1, 12, 12});
  const auto conv = g.add(Conv2d{.filters = 4, .kernel = 3}, g.input());
  const auto a = g.add(MaxPool2d{.kernel = 2}, conv);
  const auto b = g.add(MaxPool2d{.kernel = 2}, conv);
  const auto joined = g.add(Add{}, {a, b});
  const auto flat = g.add(Flatten{}, joined);
  g.add(LogSoftmax{}, g.add(Dense{.units = 10}, flat));
  const Model two_readers = g.build();
  EXPECT_FALSE(fused_anything(two_readers, o)) << "a conv output with two readers";
  expect_same_training(two_readers, o, 1);
  // The pool's output read twice: the pool fuses, the ReLU does not.
  GraphBuilder h({1, 12, 12});
  const auto pooled = h.add(MaxPool2d{.kernel = 2}, h.add(Conv2d{.filters = 4, .kernel = 3}, h.input()));
  const auto relu = h.add(ReLU{}, pooled);
  const auto sum = h.add(Add{}, {relu, pooled});
  h.add(LogSoftmax{}, h.add(Dense{.units = 10}, h.add(Flatten{}, sum)));
  const Model pool_read_twice = h.build();
  const std::vector<std::string> in = runs_in(*compile(pool_read_twice, o, true));
  EXPECT_EQ(in[1], "conv2d_0");
  EXPECT_EQ(in[2], "");
  expect_same_training(pool_read_twice, o, 2);
}

INSTANTIATE_TEST_SUITE_P(KernelSets, ConvPoolFusion,
                         ::testing::Values(KernelSet::base, KernelSet::avx2, KernelSet::avx512),
                         [](const auto& info) { return std::string(kernel_set_name(info.param)); });

}  // namespace
}  // namespace convoy
