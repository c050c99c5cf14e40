// --precision bf16 on the CPU (CompileOptions::precision, weighted_op.h):
// convolutions and dense layers multiply bfloat16 inputs and weights with
// fp32 sums. Their outputs and gradients stay within bf16's rounding of the
// fp32 ones, 1% of the tensor's largest value (bf16 keeps 8 significant bits,
// 0.4% per rounding; the sums add a little), yet measurably differ (bf16 did
// run); training lowers the loss; the master weights stay fp32. A CPU without
// AVX512-BF16 refuses bf16 naming the flag; these tests skip there, saying so.
#include <cstring>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/nn/model.h"
#include "convoy/nn/sequential.h"
#include "test_helpers.h"

namespace convoy {
namespace {

using testing::relative_error;

constexpr int64_t kBatch = 8;
constexpr double kBf16Tolerance = 1e-2;  // relative to the tensor's largest magnitude
constexpr double kRoundingShows = 1e-5;  // fp32 kernels of another kind agree closer than this

#define SKIP_WITHOUT_BF16()                                                              \
  if (const std::string why = cpu_bf16_missing(); !why.empty()) GTEST_SKIP() << "bf16: " << why

std::vector<float> random_values(std::size_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

std::vector<int32_t> labels() { return {1, 7, 3, 9, 0, 4, 2, 5}; }

struct Pass {
  double loss;
  std::vector<float> output, grads, input_grad;
};

CompileOptions options(Precision precision) {
  return {.batch_size = kBatch, .loss = Loss::softmax_cross_entropy, .optimizer = {.lr = 0.05f, .momentum = 0.9f},
          .input_gradient = true, .precision = precision};
}

Pass one_pass(const nn::Model& model, Precision precision) {
  auto exe = compile_cpu(model, options(precision), 11);
  const auto x = random_values(static_cast<std::size_t>(kBatch * numel(model.input_shape())), 3);
  const auto y = labels();
  Pass p;
  p.loss = exe->internals().loss_and_gradients(x.data(), y.data());
  p.output.resize(static_cast<std::size_t>(kBatch * exe->compiled_for().output_size));
  p.grads.resize(static_cast<std::size_t>(model.num_parameters()));
  p.input_grad.resize(x.size());
  exe->internals().read(Held::output, p.output);
  exe->internals().read(Held::gradients, p.grads);
  exe->internals().read(Held::input_gradient, p.input_grad);
  return p;
}

void expect_bf16_close(const nn::Model& model) {
  const Pass f = one_pass(model, Precision::fp32), b = one_pass(model, Precision::bf16);
  EXPECT_NEAR(b.loss, f.loss, kBf16Tolerance * std::max(1.0, std::abs(f.loss)));
  for (const auto& [name, got, want] : {std::tuple{"output", &b.output, &f.output},
                                        std::tuple{"parameter gradients", &b.grads, &f.grads},
                                        std::tuple{"input gradient", &b.input_grad, &f.input_grad}}) {
    const double err = relative_error(*got, *want);
    EXPECT_LT(err, kBf16Tolerance) << name;
    EXPECT_GT(err, kRoundingShows) << name << ": bf16 changed nothing; did it run in fp32?";
  }
}

// One convolution geometry, then a linear head so the loss depends on every
// output. No ReLU right after the convolution: where an output lies within
// bf16's rounding of zero its gradient flips between passing and not, which
// moves single input-gradient sums by several percent (4% measured). That is
// reduced precision's effect in any framework, not the kernels'; the seed CNN
// below has ReLUs and max pools and is held to the same bound.
nn::Model conv_model(Shape input, nn::Conv2d conv) {
  using namespace nn;
  return Sequential(input, {conv, Flatten{}, Dense{.units = 10}});
}

TEST(Bf16, Conv5x5LikeTheSeedCnnsSecond) {
  SKIP_WITHOUT_BF16();
  expect_bf16_close(conv_model({10, 12, 12}, {.filters = 20, .kernel = 5}));
}

TEST(Bf16, Conv3x3StridedPaddedWithoutBias) {
  SKIP_WITHOUT_BF16();
  expect_bf16_close(conv_model({8, 9, 9}, {.filters = 12, .kernel = 3, .stride = 2, .padding = 1, .bias = false}));
}

TEST(Bf16, GroupedConv) {
  SKIP_WITHOUT_BF16();
  expect_bf16_close(conv_model({6, 8, 8}, {.filters = 12, .kernel = 3, .padding = 1, .groups = 3}));
}

TEST(Bf16, DenseLayers) {
  SKIP_WITHOUT_BF16();
  using namespace nn;
  expect_bf16_close(Sequential({96}, {Dense{.units = 40}, ReLU{}, Dense{.units = 10}}));
}

// A single-channel first convolution stays on convoy's fp32 kernels (PlanarConv), the rest is bf16.
TEST(Bf16, SeedCnnShape) {
  SKIP_WITHOUT_BF16();
  expect_bf16_close(nn::seed_cnn());
}

TEST(Bf16, TrainingLowersTheLossAndKeepsFp32MasterWeights) {
  SKIP_WITHOUT_BF16();
  const nn::Model model = nn::seed_cnn();
  auto exe = compile_cpu(model, options(Precision::bf16), 11);
  const auto x = random_values(static_cast<std::size_t>(kBatch * numel(model.input_shape())), 4);
  const auto y = labels();
  const double first = exe->internals().loss_and_gradients(x.data(), y.data());
  for (int step = 0; step < 30; ++step) exe->train_step(x.data(), y.data());
  const double last = exe->internals().loss_and_gradients(x.data(), y.data());
  EXPECT_LT(last, 0.5 * first) << "30 bf16 steps on one batch should fit it";
  // Updates smaller than bf16's spacing still land: the master weights use all 24 bits.
  std::vector<float> w(static_cast<std::size_t>(model.num_parameters()));
  exe->internals().read(Held::parameters, w);
  int64_t beyond_bf16 = 0;
  for (float v : w) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    beyond_bf16 += (bits & 0xffffu) != 0;
  }
  EXPECT_GT(beyond_bf16, static_cast<int64_t>(w.size()) / 2);
}

TEST(Bf16, ACpuWithoutItRefusesNamingTheFlag) {
  const std::string why = cpu_bf16_missing();
  if (why.empty()) GTEST_SKIP() << "this CPU has AVX512-BF16; tests/precision_cli.sh forces the refusal";
  const std::string msg = testing::error_of([] { compile_cpu(nn::seed_cnn(), options(Precision::bf16), 1); });
  EXPECT_NE(msg.find("--precision bf16: " + why), std::string::npos) << msg;
}

TEST(Bf16, Fp32OnlyBackendsRefuseByName) {
  const std::string msg = testing::error_of([] { require_fp32(Precision::bf16, "CUDA"); });
  EXPECT_NE(msg.find("--precision bf16: the CUDA backend trains in fp32 only"), std::string::npos) << msg;
  EXPECT_EQ(testing::error_of([] { require_fp32(Precision::fp32, "CUDA"); }), "(no exception)");
  EXPECT_NE(testing::error_of([] { parse_precision("fp16"); }).find("fp32 or bf16"), std::string::npos);
}

}  // namespace
}  // namespace convoy
