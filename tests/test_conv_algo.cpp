// The choice between oneDNN's direct convolution and our Winograd F(2×2, 3×3)
// (CompileOptions::conv_algo, winograd_conv.h): either can be forced; they agree to
// float rounding on a small CNN but are different code (not the same bits); Winograd training is bit-identical run to run; a misspelt value is a
// user error. The kernels themselves are checked against reference sums in
// test_cpu_kernels.cpp and by finite differences in test_gradcheck.cpp.
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/nn/sequential.h"
#include "test_helpers.h"

namespace convoy {
namespace {

constexpr int64_t kBatch = 6;

// 3×3 pad-1 convolutions on 12×12, 6×6 and 3×3 maps, with batch norm,
// pooling and a head: small enough to train in a test. `auto` picks Winograd
// for the 32→64 convolution, oneDNN for the others but 3→32's input
// gradient, our direct kernels' (direct_conv.h).
nn::Model small_cnn() {
  using namespace nn;
  return Sequential({3, 12, 12}, {Conv2d{.filters = 32, .kernel = 3, .padding = 1}, BatchNorm{}, ReLU{},
                                  Conv2d{.filters = 64, .kernel = 3, .padding = 1, .bias = false}, BatchNorm{}, ReLU{},
                                  MaxPool2d{.kernel = 2}, Conv2d{.filters = 32, .kernel = 3, .padding = 1}, ReLU{},
                                  MaxPool2d{.kernel = 2}, Conv2d{.filters = 20, .kernel = 3, .padding = 1}, ReLU{},
                                  GlobalAvgPool{}, Dense{.units = 10}});
}

CompileOptions training_options(const char* algo) {
  return {.batch_size = kBatch, .loss = Loss::softmax_cross_entropy,
          .optimizer = {.lr = 0.05f, .momentum = 0.9f}, .input_gradient = true, .conv_algo = parse_conv_algo(algo)};
}

std::vector<float> random_values(std::size_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

std::vector<int32_t> labels() { return {1, 7, 3, 9, 0, 4}; }

struct Gradients {
  double loss;
  std::vector<float> params, input;
};

// One loss-and-gradients pass of a freshly compiled small CNN (same
// seed, so same initial weights) under `algo`.
Gradients gradients_with(const char* algo) {
  const nn::Model model = small_cnn();
  auto exe = compile_cpu(model, training_options(algo), 21);
  const std::vector<float> x = random_values(static_cast<std::size_t>(kBatch * numel(model.input_shape())), 5);
  const std::vector<int32_t> y = labels();
  Gradients g;
  g.loss = exe->internals().loss_and_gradients(x.data(), y.data());
  g.params.resize(static_cast<std::size_t>(model.num_parameters()));
  g.input.resize(x.size());
  exe->internals().read(Held::gradients, g.params);
  exe->internals().read(Held::input_gradient, g.input);
  return g;
}

// The weights after three SGD-momentum steps under `algo`.
std::vector<float> weights_after_training(const char* algo) {
  const nn::Model model = small_cnn();
  auto exe = compile_cpu(model, training_options(algo), 21);
  const std::vector<float> x = random_values(static_cast<std::size_t>(kBatch * numel(model.input_shape())), 6);
  const std::vector<int32_t> y = labels();
  for (int step = 0; step < 3; ++step) exe->train_step(x.data(), y.data());
  std::vector<float> w(static_cast<std::size_t>(model.num_parameters()));
  exe->internals().read(Held::parameters, w);
  return w;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST(ConvAlgo, ForcedDirectAndWinogradAgreeButAreDifferentCode) {
  const Gradients direct = gradients_with("direct"), winograd = gradients_with("winograd");
  EXPECT_NEAR(direct.loss, winograd.loss, 1e-5 * std::abs(direct.loss));
  EXPECT_LT(testing::relative_error(winograd.params, direct.params), 1e-4) << "parameter gradients";
  EXPECT_LT(testing::relative_error(winograd.input, direct.input), 1e-4) << "input gradient";
  // Equal bits would mean one path ran twice: the forcing did not reach the layers.
  EXPECT_FALSE(same_bits(direct.params, winograd.params));
}

TEST(ConvAlgo, AutoPicksWinogradForWideLayersAndAgreesWithDirect) {
  const Gradients direct = gradients_with("direct"), chosen = gradients_with("auto");
  EXPECT_LT(testing::relative_error(chosen.params, direct.params), 1e-4);
  EXPECT_FALSE(same_bits(direct.params, chosen.params)) << "auto ran oneDNN for the 32->64 and 64->32 layers too";
}

TEST(ConvAlgo, WinogradTrainingIsBitIdenticalRunToRun) {
  const std::vector<float> first = weights_after_training("winograd"), second = weights_after_training("winograd");
  EXPECT_TRUE(same_bits(first, second));
}

TEST(ConvAlgo, UnknownAlgorithmIsAUserErrorNamingTheChoices) {
  try {
    parse_conv_algo("fastest");
    FAIL() << "parsed 'fastest'";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("'fastest'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("auto, direct or winograd"), std::string::npos) << e.what();
  }
  for (ConvAlgo a : {ConvAlgo::automatic, ConvAlgo::direct, ConvAlgo::winograd})
    EXPECT_EQ(parse_conv_algo(conv_algo_name(a)), a);
}

// The library reads no environment for it: only CompileOptions chooses.
TEST(ConvAlgo, TheEnvironmentNoLongerChooses) {
  setenv("CONVOY_CONV_ALGO", "winograd", 1);
  const Gradients with_variable = gradients_with("direct");
  unsetenv("CONVOY_CONV_ALGO");
  EXPECT_TRUE(same_bits(with_variable.params, gradients_with("direct").params));
}

}  // namespace convoy
