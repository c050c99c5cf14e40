// The numerical guard: a NaN or Inf in a step's loss or gradients is caught
// at that step, named by where it first showed, and never applied.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "convoy/backends/executable_internals.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/train/fit.h"
#include "test_helpers.h"

namespace convoy::train {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const data::TrainTest& fashion() {
  static const data::TrainTest d = data::load_fashion_mnist(data::kFashionMnistDir);
  return d;
}

std::unique_ptr<Executable> seed_cnn(float lr = 0.01f) {
  return compile_cpu(nn::seed_cnn(), {.batch_size = 32, .optimizer = {.lr = lr, .momentum = 0.5f}}, 1);
}

std::vector<float> params_of(const Executable& exe) { return exe.internals().copy_of(Held::parameters); }
std::vector<float> state_of(const Executable& exe) { return exe.internals().copy_of(Held::state); }
bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// Sets one layer's parameters (or only its slot `only`: 1 is the bias) to
// `value` after step `at` of epoch 1.
class PoisonWeights : public Callback {
 public:
  PoisonWeights(const nn::Sequential& model, std::string layer, int64_t at, float value = kNaN, int only = -1)
      : model_(model), layer_(std::move(layer)), at_(at), value_(value), only_(only) {}
  void on_step_end(FitState& s) override {
    if (s.epoch != 1 || s.step != at_) return;
    std::vector<float> p = params_of(s.exe);
    for (const auto& plan : model_.layers())
      if (plan.name == layer_)
        for (std::size_t k = 0; k < plan.params.size(); ++k)
          if (only_ < 0 || static_cast<int>(k) == only_)
            std::fill_n(p.begin() + plan.params[k].offset, plan.params[k].size(), value_);
    s.exe.internals().write(Held::parameters, p);
  }

 private:
  const nn::Sequential& model_;
  std::string layer_;
  int64_t at_;
  float value_;
  int only_;
};

}  // namespace

TEST(NumericalGuard, ANaNInputStopsAtStepOneNamesTheInputAndChangesNothing) {
  data::LabeledImages train = data::take(fashion().train, 128);
  std::fill_n(train.images.data<float>().begin(), train.images.numel(), kNaN);
  auto exe = seed_cnn();
  const auto params = params_of(*exe), state = state_of(*exe);
  const History h = fit(*exe, train, data::take(fashion().test, 64), {.epochs = 2});
  ASSERT_TRUE(h.fault.has_value());
  EXPECT_EQ(h.fault->epoch, 1);
  EXPECT_EQ(h.fault->step, 1);
  EXPECT_EQ(h.fault->where, "the input batch (check the data)");
  EXPECT_TRUE(h.epochs.empty());  // the unfinished epoch is not recorded
  EXPECT_FALSE(h.interrupted);
  EXPECT_EQ(params_of(*exe), params);  // no update
  EXPECT_EQ(state_of(*exe), state);    // BN statistics put back
  EXPECT_EQ(exe->metrics(Metrics::keep_running).count, 0);
}

TEST(NumericalGuard, NamesTheFirstLayerWhoseOutputTurnsNonFiniteAtThatStep) {
  const nn::Sequential model = nn::seed_cnn();
  auto exe = seed_cnn();
  const History h = fit(*exe, data::take(fashion().train, 256), data::take(fashion().test, 64),
                        {.epochs = 1, .callbacks = {std::make_shared<PoisonWeights>(model, "dense_0", 3)}});
  ASSERT_TRUE(h.fault.has_value());
  EXPECT_EQ(h.fault->step, 4);  // the first step that runs with the poisoned weights
  EXPECT_EQ(h.fault->where, "the forward output of dense_0");
}

// The CPU runs the seed CNN's conv2d_0 → max_pool2d_0 → relu_0 as one op
// that writes only relu_0's output: a fault born in conv2d_0 (an infinite
// bias: every output +Inf) first shows there, and the report names the whole
// chain, conv2d_0 included, not relu_0 alone.
TEST(NumericalGuard, AFaultInsideAFusedBlockNamesTheBlocksLayers) {
  const nn::Sequential model = nn::seed_cnn();
  auto exe = seed_cnn();
  const float inf = std::numeric_limits<float>::infinity();
  const History h = fit(*exe, data::take(fashion().train, 256), data::take(fashion().test, 64),
                        {.epochs = 1, .callbacks = {std::make_shared<PoisonWeights>(model, "conv2d_0", 3, inf, 1)}});
  ASSERT_TRUE(h.fault.has_value());
  EXPECT_EQ(h.fault->step, 4);
  EXPECT_EQ(h.fault->where, "the forward output of relu_0 (one op: conv2d_0 → max_pool2d_0 → relu_0)");
}

TEST(NumericalGuard, AnExplodingLearningRateIsCaughtAtTheStepItBlowsUp) {
  auto exe = seed_cnn(/*lr=*/1e20f);
  const History h = fit(*exe, data::take(fashion().train, 512), data::take(fashion().test, 64), {.epochs = 1});
  ASSERT_TRUE(h.fault.has_value());
  EXPECT_GE(h.fault->step, 2);  // the first step's gradients are finite
  EXPECT_NE(h.fault->where.find("conv2d"), std::string::npos) << h.fault->where;
  EXPECT_NE(describe(*h.fault).find("epoch 1 step " + std::to_string(h.fault->step)), std::string::npos);
}

// Adam at a learning rate of 1e5 keeps every value finite (each update is
// about the rate: weights ~1e5, losses ~1e15), so the NaN/Inf guard never
// fires: the divergence watch stops it at the step the loss leaps, under
// either policy (issue 18, class 9).
TEST(NumericalGuard, AFiniteBlowUpIsCaughtAsDivergenceUnderEitherPolicy) {
  for (OnNonFinite policy : {OnNonFinite::stop, OnNonFinite::skip_step}) {
    auto exe = compile_cpu(nn::seed_cnn(), {.batch_size = 32, .optimizer = {.kind = optim::Kind::adam, .lr = 1e5f}}, 1);
    const History h =
        fit(*exe, data::take(fashion().train, 512), data::take(fashion().test, 64), {.epochs = 2, .on_nan = policy});
    ASSERT_TRUE(h.fault.has_value());
    EXPECT_TRUE(h.fault->diverged) << describe(*h.fault);
    EXPECT_EQ(h.fault->epoch, 1);
    EXPECT_EQ(h.fault->step, 2);  // the first step that runs with the blown-up weights
    EXPECT_TRUE(h.epochs.empty());
    EXPECT_NE(describe(*h.fault).find("training diverged at epoch 1 step 2: a diverging loss ("), std::string::npos)
        << describe(*h.fault);
  }
  // A healthy run is never taken for a diverging one.
  auto exe = seed_cnn();
  const History h = fit(*exe, data::take(fashion().train, 512), data::take(fashion().test, 64), {.epochs = 2});
  EXPECT_FALSE(h.fault.has_value());
}

TEST(NumericalGuard, SkipStepDropsOnlyTheStepsWithNaNAndCountsThem) {
  data::LabeledImages train = data::take(fashion().train, 256);  // 8 steps of 32 per epoch
  auto pixels = train.images.data<float>();
  std::fill_n(pixels.begin() + 5 * 784, 784, kNaN);  // example 5: one batch per epoch holds it
  auto exe = seed_cnn();
  const History h =
      fit(*exe, train, data::take(fashion().test, 64), {.epochs = 3, .on_nan = OnNonFinite::skip_step});
  EXPECT_FALSE(h.fault.has_value());
  ASSERT_EQ(h.epochs.size(), 3u);
  EXPECT_EQ(h.skipped_steps, 3);
  EXPECT_EQ(h.images_trained, 3 * 7 * 32);  // skipped steps add nothing to the metrics
  EXPECT_TRUE(all_finite(params_of(*exe)));
  EXPECT_TRUE(all_finite(state_of(*exe)));
  for (const auto& e : h.epochs) EXPECT_TRUE(std::isfinite(e.train_loss));
}

TEST(NumericalGuard, PoliciesParseByName) {
  EXPECT_EQ(parse_on_nan("stop", "k"), OnNonFinite::stop);
  EXPECT_EQ(parse_on_nan("skip_step", "k"), OnNonFinite::skip_step);
  EXPECT_NE(testing::error_of([] { parse_on_nan("ignore", "callbacks.on_nan"); }).find("callbacks.on_nan"),
            std::string::npos);
}

}  // namespace convoy::train
