// Config files with --set overrides, config-relative paths, close matches
// for unknown keys, and the settings a run would ignore (issue 19).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "convoy/core/error.h"
#include "convoy/config/config_warnings.h"
#include "convoy/config/run_config.h"
#include "test_helpers.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;
using testing::error_of;

std::string write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigFile, RelativePathsAreRelativeToTheFilesFolder) {
  testing::TempDir dir;
  const std::string cfg = write(dir.file("configs/run.yaml"),
                                "data: {dir: ../data/plant, kind: csv}\nmodel: {name: plant_cnn, pretrained: "
                                "w.safetensors}\noutput: {dir: /abs/out}\n");
  const RunConfig c = load_run_config(cfg);
  EXPECT_EQ(c.data_dir, dir.file("data/plant"));
  EXPECT_EQ(c.pretrained, dir.file("configs/w.safetensors"));
  EXPECT_EQ(c.out_dir, "/abs/out");  // absolute: as written
  // data.train_csv and the other data paths stay relative to data.dir.
  EXPECT_EQ(c.data.train_csv, "train.csv");
}

TEST(ConfigFile, SetOverridesTheFileTypedAsTheFile) {
  testing::TempDir dir;
  const std::string cfg =
      write(dir.file("c/run.yaml"), "optimizer: {name: adam, lr: 0.01}\ndata: {dir: d, kind: folders}\n");
  const LoadedConfig l = load_run_config(cfg, {"optimizer.lr=3e-4", "data.width=224", "data.mean=[0.5, 0.4, 0.3]",
                                               "data.augment.horizontal_flip=true", "data.dir=here"});
  EXPECT_DOUBLE_EQ(l.config.lr, 3e-4);
  EXPECT_EQ(l.config.optimizer, "adam");  // the file's, kept
  EXPECT_EQ(l.config.data.width, 224);
  EXPECT_EQ(l.config.data.mean, (std::vector<double>{0.5, 0.4, 0.3}));
  EXPECT_TRUE(l.config.data.augment.horizontal_flip);
  EXPECT_EQ(l.config.data_dir, "here");  // a --set path stays relative to the working directory
  EXPECT_TRUE(l.has("optimizer.lr") && l.has("optimizer.name") && l.has("data.width") && l.has("data.kind"));
  EXPECT_FALSE(l.has("training.epochs"));
  // Without a file: the defaults, then --set.
  EXPECT_EQ(load_run_config("", {"training.epochs=3"}).config.epochs, 3);
}

TEST(ConfigFile, BadSetsNameTheSetAndTheCloseKeys) {
  const auto set_error = [](const std::string& s) { return error_of([&] { load_run_config("", {s}); }); };
  const std::string typo = set_error("optimizer.learning_rate=0.1");
  EXPECT_NE(typo.find("--set optimizer.learning_rate=0.1: unknown key 'optimizer.learning_rate'"), std::string::npos)
      << typo;
  EXPECT_NE(typo.find("did you mean 'optimizer.lr'"), std::string::npos) << typo;
  EXPECT_NE(set_error("trainig.epochs=3").find("did you mean 'training'"), std::string::npos);
  EXPECT_NE(set_error("training.epoch=3").find("did you mean 'training.epochs'"), std::string::npos);
  EXPECT_NE(set_error("optimizer.lr=fast").find("--set optimizer.lr=fast: 'optimizer.lr' must be a number"),
            std::string::npos);
  EXPECT_NE(set_error("optimizer.lr").find("write KEY=VALUE"), std::string::npos);
  EXPECT_NE(set_error("training.epochs=0").find("training.epochs"), std::string::npos);  // ranges checked too
  // No close key: the list of known ones, no guess.
  const std::string none = set_error("optimizer.zzzzzz=1");
  EXPECT_EQ(none.find("did you mean"), std::string::npos) << none;
  EXPECT_NE(none.find("known here: alpha"), std::string::npos) << none;
}

TEST(ConfigWarnings, SettingsTheRunIgnoresAreNamed) {
  RunConfig c;
  c.optimizer = "sgd";
  const auto w = ignored_settings(c, {"optimizer.beta1", "optimizer.momentum", "transfer.fine_tune_lr"});
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NE(w[0].find("optimizer.beta1 is ignored: sgd does not read it"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("transfer.fine_tune_lr is ignored without model.pretrained"), std::string::npos) << w[1];
  c.optimizer = "adam";
  EXPECT_EQ(ignored_settings(c, {"optimizer.beta1"}).size(), 0u);
  EXPECT_EQ(ignored_settings(c, {"optimizer.nesterov"}).size(), 1u);
  // Image keys on Fashion-MNIST's IDX data.
  EXPECT_EQ(ignored_settings(c, {"data.dir", "data.width"}).size(), 1u);
  EXPECT_TRUE(ignored_settings(RunConfig{}, {}).empty());
}

}  // namespace
}  // namespace convoy::train
