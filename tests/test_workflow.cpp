// train::Workflow (workflow.h), through the public headers only: the run
// `convoy train` makes, driven from C++. A run stopped by a callback and
// resumed from its checkpoint ends with the bits of one never stopped; a
// transfer run (frozen head, then every layer) gives the CLI's weights
// byte for byte; and without a printing RunEvents nothing reaches stdout
// or stderr.
// A 40-image plant demo at 32x32 keeps each run under a second or two.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include "cli/plant_demo.h"
#include "convoy/app/run_checkpoint.h"
#include "convoy/app/console_reporter.h"
#include "convoy/app/run.h"
#include "convoy/app/workflow.h"
#include "test_helpers.h"
#include "test_records_helpers.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

using records::testing::read_bytes;

// Stops the run mid-epoch, as SIGINT would (the checkpoint saver sees it).
class StopAt : public Callback {
 public:
  StopAt(int64_t epoch, int64_t step) : epoch_(epoch), step_(step) {}
  void on_step_end(FitState& s) override {
    if (s.epoch == epoch_ && s.step == step_) s.interrupted = true;
  }

 private:
  int64_t epoch_, step_;
};

// Counts what a run says, and says nothing.
struct Recorder : RunEvents {
  int begun = 0, phases = 0, ends = 0, writes = 0;
  RunHeader header;
  void run_begins(const RunHeader& h) override {
    ++begun;
    header = h;
  }
  void phase_begins(int64_t, bool) override { ++phases; }
  void finished(const History&, const EvaluationReport&, const std::vector<std::string>&,
                const std::string&) override {
    ++ends;
  }
  void wrote(const std::string&, const std::vector<std::string>&) override { ++writes; }
};

// The run's settings as a config file: what the test gives the CLI and
// parses itself. `pretrained`: a file, and then transfer learning: epochs
// 1-2 train the head alone, epoch 3 every layer, at fine_tune_lr.
std::string config_text(const std::string& data_dir, int epochs, const std::string& pretrained = "") {
  std::string text = "data: {dir: '" + data_dir +
                     "', kind: csv, test_csv: '', width: 32, height: 32, mean: [0.5], std: [0.25]}\n"
                     "loss: {name: categorical_crossentropy, from_logits: true}\n"
                     "optimizer: {name: adam, lr: 0.01}\n"
                     "training: {epochs: " + std::to_string(epochs) + ", batch_size: 8, threads: 1, device: cpu}\n"
                     "output: {progress: lines}\n";
  if (pretrained.empty()) return text + "model: {name: plant_cnn}\n";
  return text + "model: {name: plant_cnn, pretrained: '" + pretrained +
         "'}\ntransfer: {freeze_epochs: 2, fine_tune_lr: 0.001}\n";
}

class WorkflowRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir;
    image::write_plant_demo({.out_dir = tmp_->file("plant"), .train = 40, .test = 8, .width = 48, .height = 32,
                             .seed = 7});
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::string text(int epochs, const std::string& pretrained = "") {
    return config_text(tmp_->file("plant"), epochs, pretrained);
  }
  static RunConfig config(const std::string& out, const std::string& text) {
    RunConfig c = parse_run_config(text, "workflow.yaml", /*yaml=*/true);
    c.out_dir = out.empty() ? "" : tmp_->file(out);
    return c;
  }
  static RunConfig config(const std::string& out, int epochs = 3) { return config(out, text(epochs)); }
  static testing::TempDir* tmp_;
};
testing::TempDir* WorkflowRun::tmp_ = nullptr;

TEST_F(WorkflowRun, AStoppedRunResumedThroughTheObjectEndsWithTheBitsOfOneNeverStopped) {
  Workflow(config("whole")).run();
  const RunConfig c = config("stopped");
  {
    Workflow run(c, nullptr, {std::make_shared<StopAt>(2, 3)});  // mid-epoch 2
    const RunOutcome out = run.run();
    EXPECT_TRUE(out.history.interrupted);
    EXPECT_EQ(out.stopped_by_signal, 0);
    EXPECT_FALSE(fs::exists(c.out_dir + "/model.safetensors")) << "an unfinished run writes no model";
  }
  const RunCheckpoint ck = load_latest_checkpoint(c.out_dir, std::cerr);
  EXPECT_EQ(ck.epoch, 1);
  EXPECT_EQ(ck.progress.step, 3);
  Recorder said;
  Workflow resumed(ck.config, &said);
  const RunOutcome out = resumed.run(ck);
  EXPECT_EQ(said.header.resumed_epochs, 1);
  EXPECT_EQ(said.header.resumed_steps, 3);
  ASSERT_EQ(out.history.epochs.size(), 3u);
  const std::string whole = read_bytes(tmp_->file("whole") + "/model.safetensors");
  ASSERT_FALSE(whole.empty());
  EXPECT_TRUE(whole == read_bytes(c.out_dir + "/model.safetensors")) << "the resumed weights differ";
}

TEST_F(WorkflowRun, TransferPhasesStepByStepGiveTheCliWeights) {
  Workflow(config("donor", 1)).run();
  const std::string transfer = text(3, tmp_->file("donor") + "/model.safetensors");
  const RunConfig c = config("object", transfer);
  Recorder said;
  Workflow run(c, &said);
  run.start();
  EXPECT_EQ(run.phase_count(), 2u);
  EXPECT_EQ(run.phase(), 0u);
  EXPECT_TRUE(run.fit_phase());
  EXPECT_EQ(run.history().epochs.size(), 2u);
  run.next_phase();
  EXPECT_EQ(run.phase(), 1u);
  EXPECT_FALSE(run.fit_phase());
  EXPECT_EQ(run.history().epochs.size(), 3u);
  run.finish();
  EXPECT_EQ(said.phases, 1);
  EXPECT_EQ(said.ends, 1);
  EXPECT_EQ(said.writes, 1);

  // The same config file through `convoy train`.
  const std::string file = tmp_->file("transfer.yaml");
  std::ofstream(file) << transfer;
  const std::string cli = tmp_->file("cli");
  const std::string command = std::string(CONVOY_CLI) + " train --config " + file + " --out " + cli + " --quiet >" +
                              tmp_->file("cli.log") + " 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_bytes(tmp_->file("cli.log"));
  const std::string mine = read_bytes(c.out_dir + "/model.safetensors");
  ASSERT_FALSE(mine.empty());
  EXPECT_TRUE(mine == read_bytes(cli + "/model.safetensors")) << "the CLI's transfer run has other weights";
}

TEST_F(WorkflowRun, WithoutPrintingEventsNothingReachesStdoutOrStderr) {
  std::ostringstream console;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  {
    Workflow(config("silent-donor", 1)).run();
    const RunConfig c = config("silent", text(3, tmp_->file("silent-donor") + "/model.safetensors"));
    Workflow(c, nullptr, {std::make_shared<StopAt>(3, 1)}).run();  // in the second phase
    const RunCheckpoint ck = load_latest_checkpoint(c.out_dir, console);
    Recorder quiet;  // events that print nothing
    Workflow(ck.config, &quiet).run(ck);
    EXPECT_EQ(quiet.ends, 1);
  }
  const std::string printed = ::testing::internal::GetCapturedStdout();
  const std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(printed, "");
  EXPECT_EQ(warned, "");
  // The CLI's console, installed, prints the run: to the stream it is given.
  std::ostringstream log;
  ConsoleReporter reporter(log, "lines");
  ::testing::internal::CaptureStdout();
  Workflow(config("", 1), &reporter).run();
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_NE(log.str().find("convoy: plant_cnn on "), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("epoch   1/1 "), std::string::npos) << log.str();
}

// The CLI's --out refusal is the library's: a program's new run does not
// silently replace an earlier run's outputs (or a user's model.safetensors).
TEST_F(WorkflowRun, ANewRunRefusesEarlierOutputsUnlessOverwriteAndAResumeContinues) {
  RunConfig c = config("earlier", 1);
  fs::create_directories(c.out_dir);
  std::ofstream(c.out_dir + "/model.safetensors") << "a user's model";
  std::ofstream(c.out_dir + "/notes.txt") << "a user's notes";
  const auto refusal = [](const std::function<void()>& f) { return testing::error_of(f); };
  for (const std::string& said : {refusal([&] { Workflow(c).run(); }), refusal([&] { run_training(c, nullptr); })}) {
    EXPECT_NE(said.find(c.out_dir + ": holds an earlier run's outputs (model.safetensors)"), std::string::npos) << said;
    EXPECT_NE(said.find("--resume"), std::string::npos) << said;
    EXPECT_NE(said.find("output.overwrite"), std::string::npos) << said;
  }
  EXPECT_EQ(read_bytes(c.out_dir + "/model.safetensors"), "a user's model") << "a refused run replaced it";
  c.overwrite = true;
  Workflow(c).run();
  EXPECT_NE(read_bytes(c.out_dir + "/model.safetensors"), "a user's model");
  EXPECT_EQ(read_bytes(c.out_dir + "/notes.txt"), "a user's notes");
  // A resume continues its own run's folder without output.overwrite.
  RunCheckpoint ck = load_latest_checkpoint(c.out_dir, std::cerr);
  ck.config.overwrite = false;
  ck.config.epochs = 2;
  EXPECT_EQ(Workflow(ck.config).run(ck).history.epochs.size(), 2u);
}

TEST_F(WorkflowRun, CallsOutOfOrderAreRefusedByName) {
  Workflow run(config(""));
  EXPECT_NE(testing::error_of([&] { run.fit_phase(); }).find("start()"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { run.finish(); }).find("fit_phase()"), std::string::npos);
  run.start();
  EXPECT_NE(testing::error_of([&] { run.start(); }).find("started"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { run.next_phase(); }).find("fit_phase()"), std::string::npos);
}

}  // namespace
}  // namespace convoy::train
