// Held-out models (tests/held_out_models.h): random model definitions that
// are not the zoo's, each taken through what a user does with one: the
// config's reader and writer, the summary, training on 1 and 2 threads,
// ONNX export read back, the weights through safetensors, a checkpoint and
// an exact resume, inference, and the finite-difference gradient check. The
// invalid ones are one UserError naming the layer. The peer checks (ONNX
// Runtime, PyTorch) and the CLI (exit codes, files) are
// tests/held_out_peers.py and tests/held_out_cli.sh, which drive the
// env-gated cases at the end of this file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "config/layer_config.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/threads.h"
#include "convoy/io/model_weights.h"
#include "convoy/io/onnx.h"
#include "convoy/io/safetensors.h"
#include "convoy/train/checkpoint.h"
#include "convoy/train/fit.h"
#include "gradient_check.h"
#include "held_out_models.h"
#include "test_helpers.h"

namespace convoy {
namespace {

using nlohmann::json;
using testing::HeldOutModel;

constexpr int kModels = 30;
constexpr int64_t kBatch = 4;

nn::Model build(const HeldOutModel& m) {
  train::RunConfig c;
  c.layers = train::layers_from_json(m.layers, m.name);
  return train::build_model(c, m.input, m.classes);
}

Loss loss_of(const nn::Model& model) {
  return std::holds_alternative<nn::LogSoftmax>(model.layers().back().layer) ? Loss::nll : Loss::softmax_cross_entropy;
}

CompileOptions options_for(const nn::Model& model) {
  return {.batch_size = kBatch, .loss = loss_of(model),
          .optimizer = {.kind = optim::Kind::sgd, .lr = 0.05f, .momentum = 0.9f}};
}

// 3 batches of images in [-1, 1] with labels.
data::LabeledImages tiny_data(const HeldOutModel& m, int64_t count, uint64_t seed) {
  Shape shape{count};
  shape.insert(shape.end(), m.input.begin(), m.input.end());
  data::LabeledImages d{Tensor(DType::f32, shape), Tensor(DType::i32, {count})};
  Rng rng(seed);
  for (float& v : d.images.data<float>()) v = rng.uniform(-1.0f, 1.0f);
  for (int32_t& v : d.labels.data<int32_t>()) v = static_cast<int32_t>(rng.below(static_cast<uint64_t>(m.classes)));
  return d;
}

struct TrainedRun {
  std::vector<float> params, state;
  train::History history;
};

TrainedRun train_on(const nn::Model& model, const HeldOutModel& m, int threads, int64_t epochs = 2) {
  set_num_threads(threads);
  auto exe = compile_cpu(model, options_for(model), 5);
  const auto d = tiny_data(m, 3 * kBatch, 9);
  TrainedRun r;
  r.history = train::fit(*exe, d, data::take(d, kBatch), {.epochs = epochs, .seed = 3});
  r.params = exe->internals().copy_of(Held::parameters);
  r.state = exe->internals().copy_of(Held::state);
  return r;
}

// Inference outputs of `model` with these weights.
std::vector<float> infer(const nn::Model& model, std::span<const float> params, std::span<const float> state,
                         const std::vector<float>& x) {
  auto exe = compile_cpu(model, {.batch_size = kBatch, .loss = loss_of(model)}, 0);
  exe->internals().write(Held::parameters, params);
  exe->internals().write(Held::state, state);
  std::vector<int32_t> labels(kBatch, 0);
  exe->eval_step(x.data(), labels.data(), kBatch);
  return exe->internals().copy_of(Held::output);
}

std::vector<float> input_batch(const nn::Model& model, uint64_t seed) {
  std::vector<float> x(static_cast<std::size_t>(kBatch * numel(model.input_shape())));
  Rng rng(seed);
  for (float& v : x) v = rng.uniform(-1.0f, 1.0f);
  return x;
}

bool all_finite(std::span<const float> v) {
  return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
}

class HeldOutModels : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    spec_ = testing::held_out_model(GetParam());
    model_ = std::make_unique<nn::Model>(build(spec_));
    threads_ = num_threads();
  }
  void TearDown() override { set_num_threads(threads_); }
  HeldOutModel spec_;
  std::unique_ptr<nn::Model> model_;
  int threads_ = 1;
};

// The config writes back what it read, and the summary names every layer.
TEST_P(HeldOutModels, ConfigRoundTripAndSummary) {
  SCOPED_TRACE(spec_.layers.dump());
  const json again = train::layers_to_json(train::layers_from_json(spec_.layers, spec_.name));
  EXPECT_EQ(train::layers_to_json(train::layers_from_json(again, spec_.name)), again);
  const std::string summary = model_->summary();
  for (const auto& plan : model_->layers()) EXPECT_NE(summary.find(plan.name), std::string::npos) << plan.name;
  EXPECT_EQ(model_->output_shape(), Shape{spec_.classes});
}

// Losses finite on 1 and 2 threads; the same bits run after run on each
// thread count (what docs/architecture.md promises), and close across them.
TEST_P(HeldOutModels, TrainsOnOneAndTwoThreads) {
  SCOPED_TRACE(spec_.layers.dump());
  const TrainedRun one = train_on(*model_, spec_, 1), two = train_on(*model_, spec_, 2);
  for (const TrainedRun* r : {&one, &two}) {
    ASSERT_EQ(r->history.epochs.size(), 2u);
    for (const auto& e : r->history.epochs) {
      EXPECT_TRUE(std::isfinite(e.train_loss) && std::isfinite(e.test_loss)) << e.train_loss << " " << e.test_loss;
    }
    EXPECT_TRUE(all_finite(r->params) && all_finite(r->state));
  }
  EXPECT_EQ(train_on(*model_, spec_, 1).params, one.params);
  EXPECT_EQ(train_on(*model_, spec_, 2).params, two.params);
  EXPECT_LT(testing::relative_error(two.params, one.params), 1e-3);
}

// Exported to ONNX (batch norms folded and kept) and imported back: the same outputs.
TEST_P(HeldOutModels, OnnxRoundTrip) {
  SCOPED_TRACE(spec_.layers.dump());
  const TrainedRun r = train_on(*model_, spec_, 1, 1);  // trained weights, BN statistics moved
  const auto x = input_batch(*model_, 7);
  const auto want = infer(*model_, r.params, r.state, x);
  ASSERT_TRUE(all_finite(want));
  for (bool fold : {true, false}) {
    const std::string bytes = io::onnx::encode(io::to_onnx(*model_, r.params, r.state, {.fold_batch_norm = fold}));
    const io::ImportedModel back = io::from_onnx(io::onnx::decode(bytes, spec_.name), spec_.name);
    EXPECT_EQ(back.model.output_shape(), model_->output_shape());
    const auto got = infer(back.model, back.weights.params, back.weights.state, x);
    EXPECT_LT(testing::relative_error(got, want), 2e-5) << (fold ? "folded" : "kept");
  }
}

// The weights through a safetensors file, then a checkpoint resumed mid-run:
// bit-identical to a run never stopped.
TEST_P(HeldOutModels, SafetensorsAndExactResume) {
  SCOPED_TRACE(spec_.layers.dump());
  set_num_threads(1);
  testing::TempDir dir;
  const TrainedRun full = train_on(*model_, spec_, 1, 2);
  io::write_safetensors(dir.file("model.safetensors"), io::to_named(*model_, full.params, full.state));
  const io::FlatWeights back = io::from_named(*model_, io::read_safetensors(dir.file("model.safetensors")), "model");
  EXPECT_EQ(back.params, full.params);
  EXPECT_EQ(back.state, full.state);

  const auto d = tiny_data(spec_, 3 * kBatch, 9);
  const auto test = data::take(d, kBatch);
  auto first = compile_cpu(*model_, options_for(*model_), 5);
  const train::History h1 = train::fit(*first, d, test, {.epochs = 1, .seed = 3});
  train::save_checkpoint(dir.file(train::kCheckpointFile), *model_, *first, h1);
  std::ifstream in(dir.file(train::kCheckpointFile), std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const train::Checkpoint c = train::checkpoint_of(train::parse_checkpoint_file(bytes, "checkpoint"), *model_,
                                                   options_for(*model_).optimizer, "checkpoint");
  // The run's seed (a resume compiles with its config's: dropout's masks are drawn from it);
  // the weights, statistics and optimizer state all come from the checkpoint.
  auto resumed = compile_cpu(*model_, options_for(*model_), 5);
  resumed->internals().write(Held::parameters, c.params);
  resumed->internals().write(Held::state, c.state);
  resumed->internals().write(Held::optimizer_state, c.optimizer_state);
  resumed->set_learning_rate(c.lr);
  train::fit(*resumed, d, test, {.epochs = 2, .seed = 3, .initial_epoch = c.epoch, .initial_progress = c.progress},
             c.history);
  EXPECT_EQ(resumed->internals().copy_of(Held::parameters), full.params);
  EXPECT_EQ(resumed->internals().copy_of(Held::state), full.state);
}

// Inference is per example: a part batch gives the first rows of a full one.
TEST_P(HeldOutModels, PredictsPerExample) {
  const TrainedRun r = train_on(*model_, spec_, 1, 1);
  const auto x = input_batch(*model_, 8);
  const auto all = infer(*model_, r.params, r.state, x);
  ASSERT_TRUE(all_finite(all));
  auto exe = compile_cpu(*model_, {.batch_size = kBatch, .loss = loss_of(*model_)}, 0);
  exe->internals().write(Held::parameters, r.params);
  exe->internals().write(Held::state, r.state);
  std::vector<int32_t> labels(kBatch, 0);
  exe->eval_step(x.data(), labels.data(), 2);
  const auto part = exe->internals().copy_of(Held::output);
  EXPECT_EQ(std::vector<float>(part.begin(), part.begin() + 2 * spec_.classes),
            std::vector<float>(all.begin(), all.begin() + 2 * spec_.classes));
}

// The whole model through the per-op tests' finite-difference check.
TEST_P(HeldOutModels, GradientCheck) {
  SCOPED_TRACE(spec_.layers.dump());
  set_num_threads(1);
  // Model 5's 1-d batch norm over the check's batch of 3 puts one value
  // 2.5e-4 from its ReLU6's kink at 0 with the weights of seed 11, which
  // the +-1e-3 step crosses (the numeric slope is then half of each side's):
  // other weights, the same model.
  const uint64_t seed = GetParam() == 5 ? 12 : 11;
  testing::check_gradients({.name = spec_.name.c_str(), .model = *model_, .loss = loss_of(*model_), .seed = seed});
}

INSTANTIATE_TEST_SUITE_P(Generated, HeldOutModels, ::testing::Range(0, kModels));

// A model no shape fits is one UserError naming the layer and what is wrong.
TEST(HeldOutInvalidModels, OneErrorNamingTheLayer) {
  for (const auto& bad : testing::invalid_models()) {
    SCOPED_TRACE(bad.name);
    const std::string error = testing::error_of([&] {
      train::RunConfig c;
      c.layers = train::layers_from_json(bad.layers, "bad.yaml");
      train::build_model(c, bad.input, 2);
    });
    for (const auto& words : bad.says) EXPECT_NE(error.find(words), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

// A run config for the CLI (tests/held_out_cli.sh): the model's layers on
// the images of `data` (convoy demo-data plant: 4 classes) at the model's size.
json cli_config(const json& layers, const Shape& input, const std::string& data) {
  return {{"data", {{"kind", "csv"}, {"dir", data}, {"train_csv", "train.csv"}, {"images", "images"},
                    {"channels", input[0]}, {"height", input[1]}, {"width", input[2]}, {"validation_split", 0.25}}},
          {"model", {{"layers", layers}}},
          {"training", {{"epochs", 1}, {"batch_size", 8}, {"seed", 4}}}};
}

// Writes the held-out models for tests/held_out_peers.py (ONNX files, their
// inputs, convoy's outputs and the weights as safetensors, the layers in
// models.json) and, with CONVOY_HELD_OUT_DATA, run configs for
// tests/held_out_cli.sh: cli_N.json for the valid models the data's images
// can be resized to (8 pixels or more a side; the head resized to its 4
// classes), invalid_N.json for the invalid ones.
TEST(HeldOutModelCases, Write) {
  const char* dir = std::getenv("CONVOY_HELD_OUT_DIR");
  if (!dir) GTEST_SKIP() << "set CONVOY_HELD_OUT_DIR (tests/held_out_peers.py and held_out_cli.sh do)";
  const char* data = std::getenv("CONVOY_HELD_OUT_DATA");
  json index = json::array();
  for (int i = 0; i < kModels; ++i) {
    const HeldOutModel spec = testing::held_out_model(i);
    const nn::Model model = build(spec);
    const TrainedRun r = train_on(model, spec, 1, 1);
    const auto x = input_batch(model, 11);
    const std::string base = std::string(dir) + "/" + spec.name;
    io::export_onnx(base + ".onnx", model, r.params, r.state);
    io::NamedTensors t = io::to_named(model, r.params, r.state);
    Shape in{kBatch};
    in.insert(in.end(), spec.input.begin(), spec.input.end());
    Tensor input(DType::f32, in), output(DType::f32, {kBatch, spec.classes});
    std::copy(x.begin(), x.end(), input.data<float>().begin());
    const auto y = infer(model, r.params, r.state, x);
    std::copy(y.begin(), y.end(), output.data<float>().begin());
    t.emplace("case.input", std::move(input));
    t.emplace("case.output", std::move(output));
    io::write_safetensors(base + ".safetensors", t);
    index.push_back({{"name", spec.name}, {"input", spec.input}, {"classes", spec.classes}, {"layers", spec.layers}});
    if (data && spec.input[1] >= 8 && spec.input[2] >= 8) {
      json layers = spec.layers;
      json& head = layers[spec.classes_layer];
      head[head.at("type") == "dense" ? "units" : "filters"] = 4;
      std::ofstream(std::string(dir) + "/cli_" + std::to_string(i) + ".json") << cli_config(layers, spec.input, data).dump(1);
    }
  }
  std::ofstream(std::string(dir) + "/models.json") << json{{"valid", index}}.dump(1);
  if (data) {
    int i = 0;
    for (const auto& bad : testing::invalid_models()) {
      const std::string base = std::string(dir) + "/invalid_" + std::to_string(i++);
      std::ofstream(base + ".json") << cli_config(bad.layers, bad.input, data).dump(1);
      std::ofstream says(base + ".says");  // one line each that the error must hold
      for (const auto& words : bad.says) says << words << "\n";
    }
  }
}

}  // namespace
}  // namespace convoy
