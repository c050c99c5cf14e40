// The Keras-style facade: compile, fit, evaluate, predict behave as the
// pieces they wrap, and as a Keras user expects across calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "convoy/core/untrusted.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/io/safetensors.h"
#include "convoy/nn/sequential.h"
#include "convoy/nn/zoo.h"
#include "cli/plant_demo.h"
#include "convoy/app/model_files.h"
#include "convoy/app/run_checkpoint.h"
#include "convoy/app/image_data.h"
#include "convoy/train/keras_model.h"
#include "convoy/app/predict.h"
#include "convoy/app/run.h"
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
  EXPECT_EQ(model.executable().compiled_for().batch_size, 50);
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
  EXPECT_EQ(model.executable().compiled_for().device, "cpu");
  EXPECT_NE(model.device_note().find("/no/such/libpjrt.so"), std::string::npos) << model.device_note();
}

// A library user's own checkpoints, no run config involved: a fit that saved
// one continues from it, optimizer state and epoch count included, as if it
// had never stopped.
TEST(KerasModel, RestoringACheckpointContinuesAsIfNeverStopped) {
  const auto train = data::take(fashion().train, 256);
  const auto test = data::take(fashion().test, 64);
  const CompileSettings settings{.optimizer = {.lr = 0.05f, .momentum = 0.9f}, .loss = Loss::nll, .batch_size = 64,
                                 .device = "cpu"};
  KerasModel whole(nn::seed_cnn());
  whole.compile(settings);
  whole.fit(train, {.epochs = 2, .verbose = 0});

  testing::TempDir dir;
  const std::string path = dir.file(kCheckpointFile);
  KerasModel first(nn::seed_cnn());
  first.compile(settings);
  first.fit(train, {.epochs = 1, .callbacks = {std::make_shared<CheckpointSaver>(path, first.model(), "{}")},
                    .verbose = 0});
  KerasModel second(nn::seed_cnn());
  second.compile(settings);
  const CheckpointFile file = parse_checkpoint_file(read_file_bounded(path, kMaxModelBytes, "checkpoint"), path);
  second.restore(checkpoint_of(file, second.model(), settings.optimizer, path));
  second.fit(train, {.epochs = 1, .verbose = 0});
  EXPECT_EQ(second.history().epochs.size(), 2u);
  EXPECT_EQ(second.predict(test), whole.predict(test));
}

// save_model / load_model: the folder `convoy train --out` writes, read both ways.
TEST(KerasModel, SavedFolderIsWhatConvoyEvaluateAndPredictRead) {
  const auto train = data::take(fashion().train, 512);
  const auto test = data::take(fashion().test, 200);
  KerasModel model(nn::seed_cnn());
  model.compile({.optimizer = {.kind = optim::Kind::adam, .lr = 0.05f}, .loss = Loss::nll, .batch_size = 64,
                 .device = "cpu"});
  model.fit(train, {.epochs = 1, .validation_data = &test, .verbose = 0});
  testing::TempDir dir;
  save_model(model, dir.path());
  // What `convoy evaluate --checkpoint DIR` runs: the model rebuilt from the
  // folder's config, scored on Fashion-MNIST's test set.
  const Metrics cli = evaluate_checkpoint(dir.path());
  const Metrics own = model.evaluate(fashion().test);
  EXPECT_EQ(cli.count, own.count);
  EXPECT_EQ(cli.correct, own.correct);
  EXPECT_NEAR(cli.mean_loss(), own.mean_loss(), 1e-9);
  const RunCheckpoint ck = load_latest_checkpoint(dir.path(), std::cerr);
  EXPECT_EQ(ck.config.model, "seed_cnn");  // the zoo model by name, not a layer list
  EXPECT_EQ(ck.config.lr, 0.05);           // as written, not 0.05000000074505806
  EXPECT_EQ(ck.config.optimizer, "adam");
  EXPECT_TRUE(std::filesystem::exists(dir.file("model.safetensors")));
  // What `convoy predict --checkpoint DIR --input t10k-images...` writes: the model's own probabilities.
  const Predictions p = predict(dir.path(), {.input = std::string(data::kFashionMnistDir) + "/t10k-images-idx3-ubyte.gz",
                                             .output = dir.file("predictions.csv")});
  const std::vector<float> own_p = model.predict(fashion().test);
  ASSERT_EQ(p.probabilities.size(), own_p.size());
  float worst = 0;
  for (std::size_t i = 0; i < own_p.size(); ++i) worst = std::max(worst, std::abs(p.probabilities[i] - own_p[i]));
  EXPECT_LE(worst, 1e-6f);
  // And back: the same weights, optimizer state and history.
  KerasModel back = load_model(dir.path());
  EXPECT_EQ(back.history().epochs.size(), 1u);
  EXPECT_EQ(back.predict(test), model.predict(test));
}

TEST(KerasModel, AModelOfItsOwnLayersSavesAsALayerListAndLoadsBack) {
  // 3 classes of 3x16x16 colour images: saved as a class-folder run of that size.
  nn::Model net({3, 16, 16}, std::vector<nn::Layer>{nn::Conv2d{.filters = 4, .kernel = 3, .padding = 1}, nn::ReLU{},
                                                    nn::MaxPool2d{.kernel = 2}, nn::Flatten{}, nn::Dense{.units = 3}});
  KerasModel model(net);
  model.compile({.loss = Loss::softmax_cross_entropy, .batch_size = 4, .device = "cpu"});
  Tensor images(DType::f32, {8, 3, 16, 16});
  for (int64_t i = 0; i < images.numel(); ++i) images.data<float>()[i] = static_cast<float>((i * 7919) % 101) / 101.f;
  Tensor labels(DType::i32, {8});
  for (int64_t i = 0; i < 8; ++i) labels.data<int32_t>()[i] = static_cast<int32_t>(i % 3);
  const data::LabeledImages x{images, labels};
  model.fit(x, {.epochs = 2, .validation_data = &x, .verbose = 0});
  testing::TempDir dir;
  save_model(model, dir.path());
  const RunCheckpoint ck = load_latest_checkpoint(dir.path(), std::cerr);
  EXPECT_EQ(ck.config.layers.size(), 5u);
  EXPECT_EQ(ck.config.data.kind, "folders");
  EXPECT_EQ(ck.config.data.classes.size(), 3u);
  EXPECT_EQ(ck.config.loss, "categorical_crossentropy");
  EXPECT_TRUE(ck.config.from_logits);
  KerasModel back = load_model(dir.path());
  EXPECT_EQ(back.predict(x), model.predict(x));
  EXPECT_EQ(back.history().epochs.size(), 2u);
}

TEST(KerasModel, AModelARunConfigCannotRebuildIsRefusedByName) {
  nn::GraphBuilder g({1, 8, 8});
  auto y = g.add(nn::Flatten{}, g.input(), "stem");
  g.add(nn::Dense{.units = 2}, y, "head");
  KerasModel model(g.build());
  model.compile({.device = "cpu"});
  testing::TempDir dir;
  const std::string error = testing::error_of([&] { save_model(model, dir.path()); });
  EXPECT_NE(error.find("'stem'"), std::string::npos) << error;
  EXPECT_NE(error.find("save_weights"), std::string::npos) << error;
}

TEST(KerasModel, LoadReadsAConvoyTrainOutFolder) {
  testing::TempDir tmp;
  image::write_plant_demo({.out_dir = tmp.file("plant"), .train = 24, .test = 4, .width = 48, .height = 32, .seed = 5});
  RunConfig c = parse_run_config(
      "data: {kind: csv, test_csv: '', width: 32, height: 32}\n"
      "model: {name: plant_cnn}\n"
      "loss: {name: categorical_crossentropy, from_logits: true}\n"
      "optimizer: {name: adam, lr: 0.01}\n"
      "training: {epochs: 1, batch_size: 8, threads: 1, device: cpu}\n"
      "output: {progress: quiet}\n",
      "t.yaml", /*yaml=*/true);
  c.data_dir = tmp.file("plant");
  c.out_dir = tmp.file("run");
  std::ostringstream log;
  run_training(c, log);
  KerasModel model = load_model(c.out_dir);
  EXPECT_EQ(model.history().epochs.size(), 1u);
  // Scored on the run's own validation split, as `convoy evaluate` does.
  const RunCheckpoint ck = load_latest_checkpoint(c.out_dir, std::cerr);
  const Metrics own = model.evaluate(load_image_data(ck.config, /*with_training=*/false).validation);
  const Metrics cli = evaluate_checkpoint(c.out_dir);
  EXPECT_EQ(own.count, cli.count);
  EXPECT_EQ(own.correct, cli.correct);
  EXPECT_NEAR(own.mean_loss(), cli.mean_loss(), 1e-9);
  EXPECT_THROW(load_model(tmp.file("nothing")), UserError);
}

}  // namespace
}  // namespace convoy::train
