#include <gtest/gtest.h>

#include <cmath>

#include "convoy/core/error.h"
#include "convoy/config/run_config.h"
#include "test_helpers.h"

namespace convoy::train {
namespace {

std::string error_of(const std::string& text, bool yaml) {
  try {
    parse_run_config(text, "cfg", yaml);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(RunConfig, YamlAndJsonGiveTheSameConfig) {
  const RunConfig y = parse_run_config(
      "optimizer: {lr: 0.05, momentum: 0.9}\ntraining: {epochs: 3, seed: 7}\n"
      "callbacks:\n  early_stopping: {patience: 2, restore_best_weights: true}\n",
      "y", true);
  const RunConfig j = parse_run_config(
      R"({"optimizer": {"lr": 0.05, "momentum": 0.9}, "training": {"epochs": 3, "seed": 7},
          "callbacks": {"early_stopping": {"patience": 2, "restore_best_weights": true}}})",
      "j", false);
  EXPECT_EQ(run_config_json(y), run_config_json(j));
  EXPECT_DOUBLE_EQ(y.lr, 0.05);
  EXPECT_EQ(y.epochs, 3);
  EXPECT_EQ(y.batch_size, 128);  // default kept
  ASSERT_TRUE(y.early_stopping.has_value());
  EXPECT_EQ(y.early_stopping->monitor, "val_loss");
  EXPECT_EQ(y.early_stopping->patience, 2);
  // The JSON form round-trips (checkpoints store it).
  EXPECT_EQ(run_config_json(parse_run_config(run_config_json(y), "again", false)), run_config_json(y));
}

TEST(RunConfig, FloatSettingsShowAsWrittenInTheSavedConfig) {
  // The report and checkpoints show run_config_json: a float setting shows
  // as typed (0.05), not as the float's double (0.05000000074505806).
  RunConfig c = parse_run_config(
      "data: {kind: folders, augment: {rotation: 0.05, zoom: 0.1, hue: 0.02}}\n"
      "model: {layers: [{type: conv2d, filters: 2, kernel: 3}, {type: dropout, rate: 0.3}, "
      "{type: batch_norm, momentum: 0.01, eps: 0.001}, flatten, {type: dense, units: 2}]}\n",
      "t.yaml", /*yaml=*/true);
  const std::string text = run_config_json(c);
  for (const char* shown : {"\"rotation\": 0.05,", "\"zoom\": 0.1\n", "\"hue\": 0.02,", "\"rate\": 0.3",
                            "\"momentum\": 0.01,", "\"eps\": 0.001"})
    EXPECT_NE(text.find(shown), std::string::npos) << shown << " in\n" << text;
  EXPECT_EQ(text.find("0000000"), std::string::npos) << text;
  // And it reads back to the same floats.
  const RunConfig back = parse_run_config(text, "saved", /*yaml=*/false);
  EXPECT_EQ(back.data.augment.rotation, c.data.augment.rotation);
  EXPECT_EQ(back.data.augment.zoom, c.data.augment.zoom);
}

TEST(RunConfig, LossNamesMapToTheBackendsLosses) {
  EXPECT_EQ(loss_kind(parse_run_config("", "c", true)), Loss::nll);
  EXPECT_EQ(loss_kind(parse_run_config("loss: {name: categorical_crossentropy, from_logits: true}", "c", true)),
            Loss::softmax_cross_entropy);
  EXPECT_EQ(loss_kind(parse_run_config("loss: {name: sparse_categorical_crossentropy}", "c", true)), Loss::nll);
  const RunConfig b = parse_run_config("loss: {name: binary_crossentropy, from_logits: true, label_smoothing: 0.1}",
                                       "c", true);
  EXPECT_EQ(loss_kind(b), Loss::binary_cross_entropy);
  EXPECT_DOUBLE_EQ(b.label_smoothing, 0.1);
}

TEST(RunConfig, ModelsWrittenAsLayerListsBuildAndRoundTrip) {
  const RunConfig c = parse_run_config(R"(
model:
  layers:
    - {type: conv2d, filters: 10, kernel: 5}
    - {type: max_pool2d, kernel: 2}
    - relu
    - batch_norm
    - {type: conv2d, filters: 20, kernel: 5}
    - {type: max_pool2d, kernel: 2}
    - relu
    - batch_norm
    - flatten
    - {type: dense, units: 50}
    - relu
    - {type: dense, units: 10}
    - log_softmax
)", "layers.yaml", true);
  EXPECT_EQ(build_model(c, {1, 28, 28}).summary(), nn::seed_cnn().summary());
  // The JSON form (what checkpoints store) rebuilds the same model.
  const RunConfig again = parse_run_config(run_config_json(c), "again", false);
  EXPECT_EQ(run_config_json(again), run_config_json(c));
  EXPECT_EQ(build_model(again, {1, 28, 28}).summary(), nn::seed_cnn().summary());

  // A residual graph: joins name their inputs.
  const RunConfig g = parse_run_config(R"(
model:
  layers:
    - {type: conv2d, filters: 4, kernel: 3, padding: 1}
    - relu
    - {type: conv2d, filters: 4, kernel: 3, padding: 1, inputs: [relu_0]}
    - {type: add, inputs: [relu_0, conv2d_1]}
    - flatten
    - {type: dense, units: 3}
)", "graph.yaml", true);
  const nn::Model m = build_model(g, {1, 6, 6});
  EXPECT_FALSE(m.is_chain());
  EXPECT_EQ(m.layers()[3].inputs, (std::vector<int>{1, 2}));
}

// The zoo's layers in a list: a depthwise-separable block with
// squeeze-excitation, written as a config, equals the same graph built in C++.
TEST(RunConfig, LayerListHasTheZooLayers) {
  const RunConfig c = parse_run_config(R"(
model:
  layers:
    - {type: conv2d, filters: 8, kernel: 3, stride: 2, padding: same, bias: false}
    - batch_norm
    - relu6
    - {type: conv2d, filters: 8, kernel: 3, padding: 1, groups: 8}
    - silu
    - {type: global_avg_pool, keep_dims: true}
    - {type: conv2d, filters: 8, kernel: 1}
    - sigmoid
    - {type: multiply, inputs: [silu_0, sigmoid_0]}
    - {type: avg_pool2d, kernel: 2, count_include_pad: false}
    - {type: max_pool2d, kernel: 3, stride: 1, padding: 1}
    - global_avg_pool
    - {type: dropout, rate: 0.2}
    - {type: dense, units: 5}
)", "zoo_layers.yaml", true);
  nn::GraphBuilder g({3, 16, 16});
  auto x = g.add(nn::Conv2d{.filters = 8, .kernel = 3, .stride = 2, .padding = nn::kSame, .bias = false}, g.input());
  x = g.add(nn::BatchNorm{}, x);
  x = g.add(nn::ReLU6{}, x);
  x = g.add(nn::Conv2d{.filters = 8, .kernel = 3, .padding = 1, .groups = 8}, x);
  const auto act = g.add(nn::SiLU{}, x);
  x = g.add(nn::GlobalAvgPool{.keep_dims = true}, act);
  x = g.add(nn::Conv2d{.filters = 8, .kernel = 1}, x);
  x = g.add(nn::Sigmoid{}, x);
  x = g.add(nn::Multiply{}, {act, x});
  x = g.add(nn::AvgPool2d{.kernel = 2, .count_include_pad = false}, x);
  x = g.add(nn::MaxPool2d{.kernel = 3, .stride = 1, .padding = 1}, x);
  x = g.add(nn::GlobalAvgPool{}, x);
  x = g.add(nn::Dropout{.rate = 0.2f}, x);
  g.add(nn::Dense{.units = 5}, x);
  EXPECT_EQ(build_model(c, {3, 16, 16}).summary(), g.build().summary());
  const RunConfig again = parse_run_config(run_config_json(c), "again", false);
  EXPECT_EQ(run_config_json(again), run_config_json(c));
  EXPECT_NE(error_of("model: {layers: [{type: conv2d, filters: 4, kernel: 3, padding: valid}]}", true).find("\"same\""),
            std::string::npos);
  EXPECT_NE(error_of("model: {layers: [{type: dropout, rate: 1.5}]}", true).find("model.layers[0].rate"), std::string::npos);
}

// clip with both bounds or one (the other absent, infinite), and affine; the
// config written back reads the same.
TEST(RunConfig, ClipAndAffineLayers) {
  const RunConfig c = parse_run_config(R"(
model:
  layers:
    - {type: clip, min: -1, max: 2.5}
    - {type: clip, max: 3}
    - affine
    - flatten
)", "clip.yaml", true);
  const nn::Model m = build_model(c, {2, 3, 3});
  const auto& both = std::get<nn::Clip>(m.layers()[0].layer);
  EXPECT_EQ(both.min, -1.0f);
  EXPECT_EQ(both.max, 2.5f);
  const auto& top = std::get<nn::Clip>(m.layers()[1].layer);
  EXPECT_TRUE(std::isinf(top.min) && top.min < 0);
  EXPECT_EQ(top.max, 3.0f);
  EXPECT_EQ(m.layers()[2].params.size(), 2u);
  const RunConfig again = parse_run_config(run_config_json(c), "again", false);
  EXPECT_EQ(run_config_json(again), run_config_json(c));
  EXPECT_EQ(build_model(again, {2, 3, 3}).summary(), m.summary());
  EXPECT_NE(error_of("model: {layers: [{type: clip, min: 2, max: 1}]}", true).find("model.layers[0].min"), std::string::npos);
}

// A zoo model named in a config takes the data's input shape and classes.
TEST(RunConfig, ZooModelTakesTheDataShapeAndClasses) {
  const RunConfig c = parse_run_config("model: {name: resnet18}", "zoo.yaml", true);
  const nn::Model m = build_model(c, {3, 64, 64}, 4);
  EXPECT_EQ(m.input_shape(), (Shape{3, 64, 64}));
  EXPECT_EQ(m.output_shape(), (Shape{4}));
}

TEST(RunConfig, LayerListMistakesNameTheItem) {
  EXPECT_NE(error_of("model: {layers: [{type: conv3d}]}", true).find("model.layers[0].type: unknown layer type 'conv3d'"),
            std::string::npos);
  EXPECT_NE(error_of("model: {layers: [{type: conv2d, kernel: 3}]}", true).find("'model.layers[0].filters'"),
            std::string::npos);
  EXPECT_NE(error_of("model: {layers: [relu, {type: dense, units: 3, activation: relu}]}", true)
                .find("unknown key 'model.layers[1].activation'"),
            std::string::npos);
  EXPECT_NE(error_of("model: {layers: []}", true).find("non-empty list"), std::string::npos);
  const RunConfig c = parse_run_config("model: {layers: [relu, {type: add, inputs: [input, relu_7]}]}", "c", true);
  EXPECT_NE(convoy::testing::error_of([&] { build_model(c, {4}); }).find("no earlier layer is named 'relu_7'"), std::string::npos);
}

TEST(RunConfig, TheShippedConfigLoads) {
  const RunConfig c = load_run_config(std::string(CONVOY_SOURCE_DIR) + "/configs/fashion_mnist.yaml");
  EXPECT_EQ(c.model, "seed_cnn");
  EXPECT_EQ(c.epochs, 50);
  EXPECT_DOUBLE_EQ(c.momentum, 0.5);
  EXPECT_EQ(c.early_stopping->patience, 20);
}

TEST(RunConfig, BadKeysTypesAndValuesNameTheKeyAndFile) {
  EXPECT_NE(error_of("optimizer: {lrr: 0.1}", true).find("unknown key 'optimizer.lrr'"), std::string::npos);
  EXPECT_NE(error_of("optimizer: {lrr: 0.1}", true).find("cfg"), std::string::npos);
  EXPECT_NE(error_of("training: {epochs: ten}", true).find("'training.epochs' must be a whole number"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"training": {"seed": -1}})", false).find("training.seed"), std::string::npos);
  EXPECT_NE(error_of("model: {name: resnet9000}", true).find("resnet9000"), std::string::npos);
  EXPECT_NE(error_of("callbacks: {early_stopping: {monitor: val_f1}}", true).find("val_f1"), std::string::npos);
  EXPECT_NE(error_of("loss: {name: hinge}", true).find("loss.name: unknown loss 'hinge'"), std::string::npos);
  EXPECT_NE(error_of("loss: {name: binary_crossentropy}", true).find("from_logits: true"), std::string::npos);
  EXPECT_NE(error_of("loss: {label_smoothing: 1.5}", true).find("loss.label_smoothing"), std::string::npos);
  EXPECT_NE(error_of("wat: 1", true).find("unknown key 'wat'"), std::string::npos);
  EXPECT_NE(error_of("{not json", false).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("a: [1, 2", true).find("not valid YAML"), std::string::npos);
  EXPECT_NE(error_of("training: {epochs: 0}", true).find("epochs"), std::string::npos);
}

}  // namespace convoy::train

namespace convoy::train {

// Found by reasoning about the fuzz target: a wrong-type value holding bytes
// that are not UTF-8 used to escape as an internal error while the message
// was built; non-UTF-8 paths would have broken checkpoints' JSON later.
// A second document is refused, found from the text alone: a trailing or
// leading marker is no second document, and the rest is never parsed.
TEST(RunConfig, YamlDocumentsAfterTheFirstAreCountedNotParsed) {
  EXPECT_NE(error_of("optimizer: {lr: 0.1}\n---\ntraining: {epochs: 2}\n", true).find("cfg: holds 2 YAML documents"),
            std::string::npos);
  EXPECT_NE(error_of("optimizer: {lr: 0.1}\n...\n--- {training: {epochs: 2}}\n", true).find("holds 2 YAML documents"),
            std::string::npos);
  EXPECT_EQ(parse_run_config("optimizer: {lr: 0.25}\n---\n", "cfg", true).lr, 0.25);
  EXPECT_EQ(parse_run_config("%YAML 1.2\n---\n# only a comment after\noptimizer: {lr: 0.25}\n...\n# end\n", "cfg", true).lr,
            0.25);
  EXPECT_EQ(parse_run_config("--- {optimizer: {lr: 0.25}}\n", "cfg", true).lr, 0.25);
  // A fuzz find: yaml-cpp asked for every document of these 464 bytes took
  // over 24 GiB (and its event parser looped forever); the config's first
  // document alone reads at once (ctest's timeout is the check).
  const std::string runaway = std::string(
      ", x, x, x, x, x, x, x, x]\n"
      "a1: &a1 [*a0, *a1, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n"
      "a2: &a2 [*a1, *a1, *a1,(*a1, *a1, *a0, val_loss: *a1, *a1]\n"
      "a3: &a3 [*a2, *a1, *a2, *a2, *a1, *a2, *a2, a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
      "a1: &a1 [*a0, *a1, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n"
      "a2: &a2 [*a1, *a1, *a1,(*a1, *a1, *a0, val_loss: *a1, *a1]\n"
      "a3: &a3 [*a2, *a1, *a2, *a2, *a1, *a2, *a2, *a2, *a2, *a2]\n"
      "+a4: &a4 [*a3, *a3, *a4,\263\377\377\377, *a3, *a3, *a3, *a3, *a3, *a3]\n"
      "",
      464);
  ASSERT_EQ(runaway.size(), 464u);
  EXPECT_EQ(error_of(runaway, true).find("YAML documents"), std::string::npos);
}

TEST(RunConfig, NonUtf8ValuesAreUserErrorsNamingTheKey) {
  const std::string bad_type = testing::error_of([] { parse_run_config("training:\n  epochs: \"\xff\"\n", "c.yaml", true); });
  EXPECT_NE(bad_type.find("training.epochs"), std::string::npos) << bad_type;
  const std::string bad_dir = testing::error_of([] { parse_run_config("data:\n  dir: \"/x/\xc3\x28\"\n", "c.yaml", true); });
  EXPECT_NE(bad_dir.find("data.dir"), std::string::npos) << bad_dir;
  EXPECT_NE(bad_dir.find("UTF-8"), std::string::npos) << bad_dir;
}

TEST(RunConfig, ReliabilityKeysParseAndAreChecked) {
  const RunConfig c = parse_run_config(
      R"({"training": {"checkpoint_every_steps": 50}, "callbacks": {"on_nan": "skip_step"}})", "c.json", false);
  EXPECT_EQ(c.checkpoint_every_steps, 50);
  EXPECT_EQ(c.on_nan, "skip_step");
  const RunConfig back = parse_run_config(run_config_json(c), "back.json", false);  // as checkpoints store it
  EXPECT_EQ(back.checkpoint_every_steps, 50);
  EXPECT_EQ(back.on_nan, "skip_step");
  EXPECT_THROW(parse_run_config(R"({"callbacks": {"on_nan": "ignore"}})", "c.json", false), UserError);
  EXPECT_THROW(parse_run_config(R"({"training": {"checkpoint_every_steps": -1}})", "c.json", false), UserError);
}

}  // namespace convoy::train

namespace convoy::train {

// A trailing "---" (an empty second document) ends many generated YAML files:
// read as the one config it is; a second config with keys is still refused.
TEST(RunConfig, EmptyYamlDocumentsAreNotCountedAsConfigs) {
  EXPECT_EQ(parse_run_config("training:\n  epochs: 3\n---\n", "c.yaml", true).epochs, 3);
  EXPECT_EQ(parse_run_config("---\ntraining:\n  epochs: 4\n---\n...\n", "c.yaml", true).epochs, 4);
  EXPECT_EQ(parse_run_config("---\n---\n", "c.yaml", true).epochs, RunConfig{}.epochs);
  EXPECT_NE(testing::error_of([] { parse_run_config("training: {epochs: 3}\n---\nseed: 1\n", "c.yaml", true); })
                .find("c.yaml: holds 2 YAML documents"),
            std::string::npos);
}

}  // namespace convoy::train
