// The Keras-style facade: compile, fit, evaluate, predict behave as the
// pieces they wrap, and as a Keras user expects across calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "convoy/data/fashion_mnist.h"
#include "convoy/io/safetensors.h"
#include "convoy/nn/sequential.h"
#include "convoy/nn/zoo.h"
#include "convoy/train/keras_model.h"
#include "test_helpers.h"

namespace convoy::train {
namespace {

const data::TrainTest& fashion() {
  static const data::TrainTest d = data::load_fashion_mnist(data::kFashionMnistDir);
  return d;
}

TEST(KerasModel, CompileFitEvaluatePredictAgree) {
  const auto train = data::take(fashion().train, 2048);
  const auto test = data::take(fashion().test, 500);
  KerasModel model(nn::seed_cnn());
  model.compile({.optimizer = {.kind = optim::Kind::adam, .lr = 1e-3f}, .loss = Loss::nll, .batch_size = 64});
  std::ostringstream log;
  const History h = model.fit(train, {.epochs = 2, .validation_data = &test, .out = &log});
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_NE(log.str().find("epoch   2/2"), std::string::npos) << log.str();
  EXPECT_GT(h.epochs.back().test_accuracy, 0.6);

  // evaluate() scores the weights fit() left: the last epoch's validation figures.
  const Metrics m = model.evaluate(test);
  EXPECT_EQ(m.count, 500);
  EXPECT_DOUBLE_EQ(m.accuracy(), h.epochs.back().test_accuracy);
  EXPECT_NEAR(m.mean_loss(), h.epochs.back().test_loss, 1e-9);

  // predict(): probability rows whose arg-max gets the same examples right.
  const std::vector<float> p = model.predict(test);
  ASSERT_EQ(p.size(), 500u * 10);
  int64_t correct = 0;
  for (int64_t i = 0; i < 500; ++i) {
    const float* row = p.data() + i * 10;
    double sum = 0;
    for (int c = 0; c < 10; ++c) sum += row[c];
    EXPECT_NEAR(sum, 1.0, 1e-5);
    correct += std::max_element(row, row + 10) - row == test.labels.data<int32_t>()[i];
  }
  EXPECT_EQ(correct, m.correct);

  // A second fit continues the epochs (Keras's initial_epoch) and the history.
  const History more = model.fit(train, {.epochs = 1, .validation_data = &test, .verbose = 0});
  ASSERT_EQ(more.epochs.size(), 3u);
  EXPECT_EQ(more.epochs.back().epoch, 3);
  EXPECT_EQ(model.history().epochs.size(), 3u);
}

// save_weights / load_weights: the file the CLI writes as model.safetensors
// (io::to_named's names); loaded before compile it waits for it, and the
// reloaded model scores exactly as the saved one.
TEST(KerasModel, SavedWeightsLoadIntoAFreshModelAndScoreTheSame) {
  const auto train = data::take(fashion().train, 512);
  const auto test = data::take(fashion().test, 256);
  testing::TempDir dir;
  const std::string path = dir.path() + "/model.safetensors";
  KerasModel a(nn::seed_cnn());
  a.compile({.loss = Loss::nll, .batch_size = 64});
  a.fit(train, {.epochs = 1, .verbose = 0});
  a.save_weights(path);
  const Metrics want = a.evaluate(test);
  const io::NamedTensors saved = io::read_safetensors(path);
  EXPECT_TRUE(saved.count("conv2d_0.weight") && saved.count("batch_norm_0.running_mean"));

  KerasModel b(nn::seed_cnn());
  b.load_weights(path);  // before compile: applied by it
  b.compile({.loss = Loss::nll, .batch_size = 32, .seed = 9});
  const Metrics got = b.evaluate(test);
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_NEAR(got.mean_loss(), want.mean_loss(), 1e-6);

  KerasModel other(nn::Sequential({1, 28, 28}, {nn::Flatten{}, nn::Dense{.units = 10}, nn::LogSoftmax{}}));
  EXPECT_THROW(other.load_weights(path), UserError);
}

TEST(KerasModel, RecompilingKeepsTheWeightsAndNoValidationGivesNoValidationFigures) {
  const auto train = data::take(fashion().train, 512);
  const auto test = data::take(fashion().test, 200);
  KerasModel model(nn::seed_cnn());
  model.compile({.optimizer = {.lr = 0.05f, .momentum = 0.5f}, .loss = Loss::nll, .batch_size = 32});
  const History h = model.fit(train, {.epochs = 1, .verbose = 0});
  EXPECT_TRUE(std::isnan(h.epochs[0].test_loss));
  EXPECT_GT(h.epochs[0].train_accuracy, 0.3);
  const Metrics before = model.evaluate(test);
  // Fine-tuning at a lower learning rate, as after unfreezing a backbone.
  model.compile({.optimizer = {.lr = 1e-4f}, .loss = Loss::nll, .batch_size = 50});
  const Metrics after = model.evaluate(test);
  EXPECT_EQ(after.correct, before.correct);
  EXPECT_NEAR(after.mean_loss(), before.mean_loss(), 1e-6);
  EXPECT_EQ(model.executable().batch_size(), 50);
}

TEST(KerasModel, UsingItBeforeCompileIsAUserError) {
  KerasModel model(nn::seed_cnn());
  EXPECT_NE(testing::error_of([&] { model.evaluate(data::take(fashion().test, 10)); }).find("compile()"),
            std::string::npos);
  EXPECT_NE(model.summary().find("conv2d_0"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { model.compile({.device = "npu"}); }).find("npu"), std::string::npos);
}

// A PJRT name whose plugin is missing falls back to the CPU, saying why
// (docs/accelerators.md), as "auto" does without a GPU.
TEST(KerasModel, AMissingPjrtPluginFallsBackToTheCpu) {
  KerasModel model(nn::seed_cnn());
  model.compile({.device = "pjrt:/no/such/libpjrt.so"});
  EXPECT_EQ(model.executable().device(), "cpu");
  EXPECT_NE(model.device_note().find("/no/such/libpjrt.so"), std::string::npos) << model.device_note();
}

}  // namespace
}  // namespace convoy::train
