// --precision bf16 on the CPU (CompileOptions::precision, weighted_op.h):
// convolutions and dense layers multiply bfloat16 inputs and weights with
// fp32 sums. Their outputs and gradients stay within bf16's rounding of the
// fp32 ones, 1% of the tensor's largest value (bf16 keeps 8 significant bits,
// 0.4% per rounding; the sums add a little), yet measurably differ (bf16 did
// run); training lowers the loss; the master weights stay fp32; reruns repeat
// the bits. On a CPU whose oneDNN multiplies bf16 in AMX tiles, oneDNN's AMX
// kernels take the convolution passes amx_passes.h names from convoy's own
// fp32 kernels; without AMX those stay (ctest's bf16_without_amx reruns these
// tests with oneDNN capped below AMX, so an AMX machine checks both). A CPU
// without AVX512-BF16 refuses bf16 naming the flag; these tests skip there,
// saying so.
#include <array>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/backend_entry.h"
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

// Shapes where `automatic` picks convoy's Winograd (64 channels, 8×8) and
// small-map (stride 2 to 4×4) kernels in fp32, which on AMX give passes to oneDNN.
TEST(Bf16, Conv3x3WideOn8x8Maps) {
  SKIP_WITHOUT_BF16();
  expect_bf16_close(conv_model({64, 8, 8}, {.filters = 64, .kernel = 3, .padding = 1}));
}

TEST(Bf16, Conv3x3Stride2To4x4Maps) {
  SKIP_WITHOUT_BF16();
  expect_bf16_close(conv_model({32, 8, 8}, {.filters = 64, .kernel = 3, .stride = 2, .padding = 1}));
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

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << " differ between reruns";
}

TEST(Bf16, RerunsRepeatTheBits) {
  SKIP_WITHOUT_BF16();
  for (const nn::Model& model : {nn::seed_cnn(), conv_model({64, 8, 8}, {.filters = 64, .kernel = 3, .padding = 1})}) {
    const Pass a = one_pass(model, Precision::bf16), b = one_pass(model, Precision::bf16);
    EXPECT_EQ(a.loss, b.loss);
    expect_same_bits(a.output, b.output, "outputs");
    expect_same_bits(a.grads, b.grads, "parameter gradients");
    expect_same_bits(a.input_grad, b.input_grad, "input gradients");
  }
}

// What runs each pass of a lone convolution (WeightedOp::kernels), bound as
// a model's op is: "forward: K; input gradient: K; weight gradient: K".
std::vector<std::string> conv_kernels(const Shape& input, const nn::Conv2d& conv, Precision precision) {
  const nn::Sequential model(input, {conv});
  const nn::LayerPlan& plan = model.layers()[0];
  cpu::DnnlEnv env;
  if (precision == Precision::bf16) env.compute = dnnl::memory::data_type::bf16;
  auto op = cpu::backend(KernelSet::automatic).make_cpu_op(env, plan, kBatch, 1, ConvAlgo::automatic);
  const auto in = static_cast<std::size_t>(kBatch * numel(plan.input_shape)),
             out = static_cast<std::size_t>(kBatch * numel(plan.output_shape));
  std::vector<float> x(in), dx(in), y(out), dy(out), p = model.initial_parameters(1), g(p.size()),
      scratch(op->scratchpad_bytes() / sizeof(float) + 16);
  OpBuffers b;
  b.src = x.data(), b.dst = y.data(), b.diff_dst = dy.data(), b.diff_src = dx.data();
  b.params = p.data(), b.grads = g.data(), b.scratchpad = scratch.data();
  b.srcs = {b.src}, b.diff_srcs = {b.diff_src};
  op->bind(env, b);
  std::vector<std::string> passes;
  const std::string all = op->kernels();
  for (std::size_t at = 0; at <= all.size();) {
    const std::size_t end = std::min(all.find("; ", at), all.size());
    passes.push_back(all.substr(at, end - at));
    at = end + 2;
  }
  return passes;
}

// On AMX, each pass amx_passes.h names runs on oneDNN's AMX kernels, every
// other one on fp32's own kernels (convoy's or oneDNN's fp32 ones, by name).
// Without AMX, convoy's kernels keep every pass they run in fp32.
TEST(Bf16, OnAmxOneDnnTakesThePassesItWinsTheRestRunAsInFp32) {
  SKIP_WITHOUT_BF16();
  cpu::DnnlEnv bf16;
  bf16.compute = dnnl::memory::data_type::bf16;
  const bool amx = bf16.bf16_on_amx();
  struct Case {
    const char* what;
    Shape input;
    nn::Conv2d conv;
    std::array<bool, 3> amx_takes;  // forward, input gradient, weight gradient
  };
  const Case cases[] = {
      {"Winograd, 64->64 on 16x16", {64, 16, 16}, {.filters = 64, .kernel = 3, .padding = 1}, {true, true, true}},
      {"direct, 10->20 5x5 on 12x12", {10, 12, 12}, {.filters = 20, .kernel = 5}, {true, true, false}},
      {"small-map, 32->64 stride 2 to 4x4", {32, 8, 8}, {.filters = 64, .kernel = 3, .stride = 2, .padding = 1},
       {true, false, false}},
      {"small-map, 64->64 on 2x2", {64, 2, 2}, {.filters = 64, .kernel = 3, .padding = 1}, {false, false, false}},
      {"oneDNN, 1x1 64->128 stride 2 to 8x8", {64, 16, 16}, {.filters = 128, .kernel = 1, .stride = 2, .bias = false},
       {false, false, false}},
      {"oneDNN, 3->16 7x7 stride 2 to 16x16", {3, 32, 32}, {.filters = 16, .kernel = 7, .stride = 2, .padding = 3},
       {true, true, false}},
  };
  for (const Case& c : cases) {
    const auto fp32 = conv_kernels(c.input, c.conv, Precision::fp32);
    const auto got = conv_kernels(c.input, c.conv, Precision::bf16);
    ASSERT_EQ(got.size(), 3u) << c.what;
    ASSERT_EQ(fp32.size(), 3u) << c.what;
    for (std::size_t i = 0; i < 3; ++i) {
      const bool convoys = fp32[i].ends_with(": convoy");
      EXPECT_EQ(fp32[i].find("amx"), std::string::npos) << c.what << ": fp32 ran " << fp32[i];
      if (amx && c.amx_takes[i]) {
        EXPECT_NE(got[i].find("amx"), std::string::npos) << c.what << ": " << got[i];
      } else if (amx || convoys) {
        EXPECT_EQ(got[i], fp32[i]) << c.what << (amx ? " on AMX" : " without AMX");
      }
    }
  }
  if (!amx) GTEST_SKIP() << "checked convoy's kernels only: oneDNN does not multiply bf16 in AMX tiles here";
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
