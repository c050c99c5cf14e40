// The run config's image data section (docs/workflow.md): parsed, checked,
// and stored in checkpoints so evaluate/predict/resume rebuild the same data.
#include <gtest/gtest.h>

#include "convoy/core/error.h"
#include "convoy/config/run_config.h"

namespace convoy::train {
namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_run_config(yaml, "cfg.yaml", true);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(ImageDataConfig, ParsesAndRoundTripsThroughCheckpointJson) {
  RunConfig c = parse_run_config(
      "data:\n  dir: leaves\n  kind: csv\n  test_csv: test.csv\n  width: 96\n  height: 64\n"
      "  classes: [healthy, rust]\n  mean: [0.5, 0.4, 0.3]\n  std: [0.2]\n  on_bad_example: skip\n"
      "  augment: {horizontal_flip: true, rotation: 0.1, fill_mode: nearest, cutout: 2}\n",
      "cfg.yaml", true);
  EXPECT_EQ(c.data.kind, "csv");
  EXPECT_TRUE(c.data.reads_images());
  EXPECT_EQ(c.data.width, 96);
  EXPECT_EQ(c.data.classes, (std::vector<std::string>{"healthy", "rust"}));
  EXPECT_TRUE(c.data.augment.horizontal_flip);
  EXPECT_FLOAT_EQ(c.data.augment.rotation, 0.1f);
  EXPECT_EQ(c.data.augment.fill_mode, image::FillMode::nearest);
  EXPECT_EQ(c.data.augment.cutout, 2);
  // The model sees [channels, height, width] and the data's classes.
  EXPECT_EQ(model_input_shape(c), (Shape{3, 64, 96}));
  EXPECT_EQ(model_classes(c), 2);
  const RunConfig again = parse_run_config(run_config_json(c), "checkpoint", false);
  EXPECT_EQ(run_config_json(again), run_config_json(c));
  EXPECT_EQ(again.data.classes, c.data.classes);
  EXPECT_EQ(again.data.mean, c.data.mean);
  EXPECT_EQ(again.data.augment.fill_mode, image::FillMode::nearest);
}

TEST(ImageDataConfig, FashionMnistDefaultIsUnchanged) {
  const RunConfig c = parse_run_config("data: {dir: /somewhere}\n", "cfg.yaml", true);
  EXPECT_FALSE(c.data.reads_images());
  EXPECT_EQ(model_input_shape(c), (Shape{1, 28, 28}));
  EXPECT_EQ(model_classes(c), 0);
  // Only `dir` is written for idx, as before the image kinds existed.
  EXPECT_NE(run_config_json(c).find("\"data\": {\n    \"dir\": \"/somewhere\"\n  }"), std::string::npos)
      << run_config_json(c);
}

TEST(ImageDataConfig, MistakesNameTheKey) {
  EXPECT_NE(error_of("data: {kind: csv, augmnt: {}}\n").find("unknown key 'data.augmnt'"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, augment: {flip: true}}\n").find("data.augment.flip"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: pictures}\n").find("data.kind"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, channels: 2}\n").find("data.channels"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, mean: [0.1, 0.2]}\n").find("data.mean"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, std: [0]}\n").find("data.std"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, cache: disk}\n").find("data.cache"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, resize: cubic}\n").find("data.resize"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: tfrecord}\n").find("data.files"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, augment: {fill_mode: mirror}}\n").find("data.augment.fill_mode"),
            std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, augment: {zoom: 1.5}}\n").find("zoom"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, classes: [1, 2]}\n").find("data.classes"), std::string::npos);
  EXPECT_NE(error_of("data: {kind: csv, on_bad_example: maybe}\n").find("data.on_bad_example"), std::string::npos);
}

TEST(ImageDataConfig, ThePlantConfigLoads) {
  const RunConfig c = load_run_config(std::string(CONVOY_SOURCE_DIR) + "/configs/plant_pathology.yaml");
  EXPECT_EQ(c.data.kind, "csv");
  EXPECT_EQ(c.data.test_csv, "test.csv");
  EXPECT_EQ(c.model, "plant_cnn");
  EXPECT_EQ(loss_kind(c), Loss::softmax_cross_entropy);
  ASSERT_TRUE(c.early_stopping.has_value());
  EXPECT_EQ(c.early_stopping->patience, 20);
}

}  // namespace
}  // namespace convoy::train
