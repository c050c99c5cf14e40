// Transfer learning through the run config (docs/transfer.md): a pretrained
// file fills every layer but the head, the frozen epochs change nothing but
// the head (batch-norm statistics included), the fine-tune epochs change
// every layer, and compare_with_scratch reports both runs. A small plant_cnn
// trained on the demo data plays the "pretrained" network, so the test needs
// no download.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "convoy/core/error.h"
#include "cli/plant_demo.h"
#include "convoy/io/pretrained.h"
#include "convoy/io/safetensors.h"
#include "convoy/nn/zoo.h"
#include "convoy/app/run.h"
#include "test_helpers.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

bool same(const Tensor& a, const Tensor& b) {
  const auto x = a.data<float>(), y = b.data<float>();
  return a.shape() == b.shape() && std::equal(x.begin(), x.end(), y.begin());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class Transfer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir;
    image::write_plant_demo({.out_dir = tmp_->file("plant"), .train = 40, .test = 4, .width = 96, .height = 64,
                             .seed = 3});
    // The donor: plant_cnn trained for two epochs, saved under its layer names.
    RunConfig donor = base();
    donor.out_dir = tmp_->file("donor");
    std::ostringstream log;
    run_training(donor, log);
  }
  static void TearDownTestSuite() { delete tmp_; }

  static RunConfig base() {
    RunConfig c;
    c.data_dir = tmp_->file("plant");
    c.data.kind = "csv";
    c.data.test_csv = "";
    c.data.width = 32;
    c.data.height = 32;
    c.data.mean = {0.5};
    c.data.std = {0.25};
    c.model = "plant_cnn";
    c.loss = "categorical_crossentropy";
    c.from_logits = true;
    c.optimizer = "adam";
    c.lr = 0.01;
    c.epochs = 2;
    c.batch_size = 8;
    c.threads = 1;
    c.device = "cpu";
    c.progress = "quiet";
    return c;
  }
  static std::string donor_file() { return tmp_->file("donor") + "/model.safetensors"; }
  static std::string head() {
    const nn::Model m = nn::model_by_name("plant_cnn", {.input = {3, 32, 32}, .classes = 4});
    for (auto it = m.layers().rbegin(); it != m.layers().rend(); ++it)
      if (!it->params.empty()) return it->name + ".";
    return "";
  }
  static testing::TempDir* tmp_;
};
testing::TempDir* Transfer::tmp_ = nullptr;

TEST_F(Transfer, EpochsCountAgainstTheRunsTotalAcrossItsPhases) {
  RunConfig c = base();
  c.pretrained = donor_file();
  c.freeze_epochs = 1;  // epoch 1 frozen, epoch 2 fine-tunes
  c.progress = "lines";
  c.out_dir = tmp_->file("counted");
  std::ostringstream log;
  run_training(c, log);
  EXPECT_NE(log.str().find("epoch   1/2 "), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("epoch   2/2 "), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find("epoch   1/1 "), std::string::npos) << log.str();
}

TEST_F(Transfer, FrozenEpochsTrainTheHeadAloneAndKeepTheBackboneBitForBit) {
  RunConfig c = base();
  c.pretrained = donor_file();
  c.freeze_epochs = 2;  // every epoch frozen
  c.out_dir = tmp_->file("frozen");
  std::ostringstream log;
  run_training(c, log);
  const io::NamedTensors donor = io::read_safetensors(donor_file());
  const io::NamedTensors after = io::read_safetensors(c.out_dir + "/model.safetensors");
  ASSERT_EQ(donor.size(), after.size());
  int heads = 0, kept = 0;
  for (const auto& [name, tensor] : donor) {
    if (name.starts_with(head())) {
      ++heads;  // a new head, trained: not the donor's
      EXPECT_FALSE(same(tensor, after.at(name))) << name;
    } else {
      ++kept;  // weights and batch-norm running statistics untouched
      EXPECT_TRUE(same(tensor, after.at(name))) << name;
    }
  }
  EXPECT_GT(heads, 0);
  EXPECT_GT(kept, heads);
}

TEST_F(Transfer, FineTuneEpochsTrainEveryLayerAndTheReportComparesWithScratch) {
  RunConfig c = base();
  c.pretrained = donor_file();
  c.freeze_epochs = 1;
  c.fine_tune_lr = 0.001;
  c.compare_with_scratch = true;
  c.out_dir = tmp_->file("tuned");
  std::ostringstream log;
  const RunOutcome out = run_training(c, log);
  ASSERT_EQ(out.history.epochs.size(), 2u);  // one history across both phases
  const io::NamedTensors donor = io::read_safetensors(donor_file());
  const io::NamedTensors after = io::read_safetensors(c.out_dir + "/model.safetensors");
  // Every layer trained, except the pretrained batch norms, which stay on
  // their running statistics with scale and shift fixed (the default).
  int batch_norms = 0;
  for (const auto& [name, tensor] : donor) {
    const std::string layer = name.substr(0, name.rfind('.'));
    if (donor.contains(layer + ".running_mean")) {
      ++batch_norms;
      EXPECT_TRUE(same(tensor, after.at(name))) << name;
    } else if (name.ends_with(".weight")) {
      EXPECT_FALSE(same(tensor, after.at(name))) << name;
    }
  }
  EXPECT_GT(batch_norms, 0);
  // The scratch run is a run of its own, and the report shows both.
  EXPECT_TRUE(fs::exists(c.out_dir + "/scratch/summary.json"));
  EXPECT_TRUE(fs::exists(c.out_dir + "/comparison.png"));
  const auto summary = nlohmann::json::parse(read_text(c.out_dir + "/summary.json"));
  ASSERT_EQ(summary["compared"].size(), 2u);
  EXPECT_EQ(summary["compared"][1]["epochs"], 2);
  EXPECT_NE(read_text(c.out_dir + "/report.html").find("from scratch"), std::string::npos);
  // "From scratch" is the plain run of the same config: random weights, every
  // layer, optimizer.lr, the same epochs and seed. The donor was exactly that.
  const io::NamedTensors scratch = io::read_safetensors(c.out_dir + "/scratch/model.safetensors");
  for (const auto& [name, tensor] : donor) EXPECT_TRUE(same(tensor, scratch.at(name))) << name;
}

TEST_F(Transfer, FineTuneBatchNormTrainsThePretrainedBatchNormsWhenAsked) {
  RunConfig c = base();
  c.pretrained = donor_file();
  c.freeze_epochs = 1;
  c.fine_tune_batch_norm = true;
  c.out_dir = tmp_->file("bn");
  std::ostringstream log;
  run_training(c, log);
  const io::NamedTensors donor = io::read_safetensors(donor_file());
  const io::NamedTensors after = io::read_safetensors(c.out_dir + "/model.safetensors");
  for (const auto& [name, tensor] : donor)
    if (name.ends_with(".running_mean")) {
      EXPECT_FALSE(same(tensor, after.at(name))) << name;
    }
}

TEST_F(Transfer, ResumingInTheFineTunePhaseGivesTheUninterruptedWeights) {
  RunConfig c = base();
  c.pretrained = donor_file();
  c.freeze_epochs = 1;
  c.epochs = 3;
  c.out_dir = tmp_->file("whole");
  std::ostringstream log;
  run_training(c, log);
  // Stop after epoch 2 (the first fine-tune epoch), then resume to 3.
  RunConfig first = c;
  first.epochs = 2;
  first.out_dir = tmp_->file("halves");
  run_training(first, log);
  resume_training(first.out_dir, log, [](RunConfig& r) { r.epochs = 3; });
  const io::NamedTensors a = io::read_safetensors(c.out_dir + "/model.safetensors");
  const io::NamedTensors b = io::read_safetensors(first.out_dir + "/model.safetensors");
  for (const auto& [name, tensor] : a) EXPECT_TRUE(same(tensor, b.at(name))) << name;
}

// The shipped config: the pretrained backbone's tensors all land in the
// model it describes (four classes, its input size), the head aside.
TEST(TransferConfig, TheShippedConfigLoadsThePretrainedBackbone) {
  const RunConfig c = load_run_config(std::string(CONVOY_SOURCE_DIR) + "/configs/transfer_efficientnet_lite0.yaml");
  EXPECT_EQ(c.model, "tf_efficientnet_lite0");
  EXPECT_GT(c.freeze_epochs, 0);
  EXPECT_LT(c.freeze_epochs, c.epochs);
  EXPECT_LT(c.fine_tune_lr, c.lr);
  EXPECT_TRUE(c.compare_with_scratch);
  const nn::Model model = build_model(c, model_input_shape(c), 4);
  ASSERT_NE(model.find_layer(c.head), nullptr);
  // model.pretrained is relative to the config's folder: the repository's pretrained/.
  const std::string weights = c.pretrained;
  EXPECT_EQ(fs::path(weights), fs::path(std::string(CONVOY_SOURCE_DIR) + "/pretrained/tf_efficientnet_lite0.safetensors").lexically_normal());
  if (!fs::exists(weights)) GTEST_SKIP() << weights << " is absent (bash tools/fetch_pretrained.sh fetches it)";
  io::FlatWeights w{model.initial_parameters(1), model.initial_state()};
  EXPECT_EQ(io::load_pytorch_weights(model, weights, w, {.skip_prefixes = {c.head + "."}}),
            static_cast<int>(io::read_safetensors(weights).size()) - 2);  // all but the classifier's weight and bias
}

TEST_F(Transfer, MistakesAreOneLineNamingTheKey) {
  std::ostringstream log;
  RunConfig missing = base();
  missing.pretrained = tmp_->file("nowhere.safetensors");
  EXPECT_THROW(
      {
        try {
          run_training(missing, log);
        } catch (const UserError& e) {
          EXPECT_NE(std::string(e.what()).find("model.pretrained"), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find("fetch_pretrained"), std::string::npos) << e.what();
          throw;
        }
      },
      UserError);
  RunConfig head = base();
  head.pretrained = donor_file();
  head.head = "no_such_layer";
  head.freeze_epochs = 1;
  EXPECT_THROW(
      {
        try {
          run_training(head, log);
        } catch (const UserError& e) {
          EXPECT_NE(std::string(e.what()).find("model.head"), std::string::npos) << e.what();
          throw;
        }
      },
      UserError);
  // Gray inputs: the donor's first convolution has 3 input channels.
  RunConfig gray = base();
  gray.pretrained = donor_file();
  gray.data.channels = 1;
  EXPECT_THROW(run_training(gray, log), UserError);
  EXPECT_THROW(parse_run_config("transfer: {freeze_epochs: 5}\ntraining: {epochs: 3}", "c.yaml", true), UserError);
  EXPECT_THROW(parse_run_config("transfer: {freeze: 1}", "c.yaml", true), UserError);
}

}  // namespace
}  // namespace convoy::train
