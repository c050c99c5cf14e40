#include <fstream>
#include <limits>
#include <sstream>

#include <gtest/gtest.h>

#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/train/callbacks.h"
#include "test_helpers.h"

namespace convoy::train {
namespace {

// A small compiled model whose parameters the tests set by hand, standing in
// for the weights a real epoch would leave behind.
struct Harness {
  nn::Sequential model{{4}, {nn::Dense{.units = 3}}};
  std::unique_ptr<Executable> exe = compile_cpu(model, {.batch_size = 2}, 1);
  History history;
  FitState state{.exe = *exe, .history = history, .epoch = 0, .epochs = 10, .steps_per_epoch = 5, .batch_size = 2};

  std::vector<float> params_filled(float v) const { return std::vector<float>(model.num_parameters(), v); }
  // Runs one "epoch": weights set to v, the given validation loss recorded.
  void epoch(Callback& cb, float v, double val_loss, double val_acc = 0.5) {
    exe->internals().write(Held::parameters, params_filled(v));
    state.epoch++;
    EpochRecord r{.epoch = state.epoch, .train_loss = 1.0, .train_accuracy = 0.5, .test_loss = val_loss,
                  .test_accuracy = val_acc};
    history.epochs.push_back(r);
    cb.on_epoch_end(state, r);
  }
  std::vector<float> params() const {
    std::vector<float> p(model.num_parameters());
    exe->internals().read(Held::parameters, p);
    return p;
  }
};

}  // namespace

TEST(EarlyStopping, StopsAfterPatienceAndRestoresTheBestEpochsWeights) {
  Harness h;
  EarlyStopping es({.monitor = "val_loss", .patience = 2, .restore_best_weights = true});
  es.on_train_begin(h.state);
  h.epoch(es, 1.0f, 1.00);
  h.epoch(es, 2.0f, 0.80);  // best
  h.epoch(es, 3.0f, 0.90);
  EXPECT_FALSE(h.state.stop_training);
  h.epoch(es, 4.0f, 1.10);  // second epoch without improvement
  EXPECT_TRUE(h.state.stop_training);
  EXPECT_EQ(es.best_epoch(), 2);
  EXPECT_EQ(es.stopped_epoch(), 4);
  EXPECT_EQ(h.params(), h.params_filled(2.0f));
}

TEST(EarlyStopping, MaximisesAccuracyMinDeltaAndNoRestore) {
  Harness h;
  EarlyStopping es({.monitor = "val_accuracy", .patience = 1, .min_delta = 0.01});
  es.on_train_begin(h.state);
  h.epoch(es, 1.0f, 9.0, 0.80);
  h.epoch(es, 2.0f, 9.0, 0.805);  // better, but by less than min_delta
  EXPECT_TRUE(h.state.stop_training);
  EXPECT_EQ(h.params(), h.params_filled(2.0f));  // weights left as they are
  EXPECT_THROW(EarlyStopping({.monitor = "val_f1"}), UserError);
  EXPECT_THROW(EarlyStopping({.mode = "sideways"}), UserError);
}

// Resumed after epochs whose val_loss did not improve, early stopping counts
// them: it stops at the epoch an uninterrupted run would.
TEST(EarlyStopping, AResumedFitReplaysItsHistory) {
  Harness h;
  h.history.epochs = {{.epoch = 1, .test_loss = 1.0}, {.epoch = 2, .test_loss = 0.8}, {.epoch = 3, .test_loss = 0.9}};
  h.state.epoch = 3;
  EarlyStopping es({.monitor = "val_loss", .patience = 2, .restore_best_weights = true});
  es.on_train_begin(h.state);
  EXPECT_EQ(es.best_epoch(), 2);
  h.epoch(es, 4.0f, 1.1);  // the second epoch without improvement
  EXPECT_TRUE(h.state.stop_training);
  EXPECT_EQ(es.stopped_epoch(), 4);
  EXPECT_EQ(h.params(), h.params_filled(4.0f));  // epoch 2's weights were not in memory: kept as they are
}

TEST(TerminateOnNaN, StopsOnANonFiniteLoss) {
  Harness h;
  TerminateOnNaN t;
  t.on_batch_end(h.state, 1, {.loss_sum = 3.0, .correct = 1, .count = 2});
  EXPECT_FALSE(h.state.stop_training);
  t.on_batch_end(h.state, 2, {.loss_sum = std::numeric_limits<double>::quiet_NaN(), .correct = 1, .count = 4});
  EXPECT_TRUE(h.state.stop_training);
  EXPECT_TRUE(t.triggered());
}

TEST(CsvLogger, WritesARowPerEpochWithAHeader) {
  testing::TempDir dir;
  Harness h;
  CsvLogger csv(dir.file("history.csv"));
  h.epoch(csv, 1.0f, 0.5);
  h.epoch(csv, 1.0f, 0.25);
  std::ifstream in(dir.file("history.csv"));
  std::string header, row1, row2, extra;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_EQ(header, "epoch,loss,accuracy,val_loss,val_accuracy,lr,train_seconds,images_per_second");
  EXPECT_EQ(row1.substr(0, 2), "1,");
  EXPECT_NE(row2.find(",0.250000,"), std::string::npos);
  EXPECT_FALSE(std::getline(in, extra));
}

TEST(ProgressLogger, PlainModePrintsOneLinePerEpochAndNoBar) {
  Harness h;
  std::ostringstream out;
  ProgressLogger p(out, /*live_bar=*/false);
  p.on_epoch_begin(h.state);
  p.on_batch_end(h.state, 1, {.loss_sum = 1, .correct = 1, .count = 2});
  h.epoch(p, 1.0f, 0.5);
  EXPECT_EQ(out.str().find('\r'), std::string::npos);
  EXPECT_NE(out.str().find("epoch   1/10"), std::string::npos);
  std::ostringstream live;
  ProgressLogger bar(live, /*live_bar=*/true, /*columns=*/120);
  bar.on_epoch_begin(h.state);
  bar.on_batch_end(h.state, 5, {.loss_sum = 1, .correct = 1, .count = 10});  // last step always drawn
  EXPECT_NE(live.str().find("Epoch 1/10 5/5 [=============================="), std::string::npos) << live.str();
}

// Every redraw of the live bar fits the terminal: at 80 columns (and at 40)
// no line reaches the last column, so the terminal never wraps it.
TEST(ProgressLogger, TheBarFitsTheTerminalAndNamesTheEpochAndTheEvaluation) {
  for (int columns : {80, 40}) {
    Harness h;
    std::ostringstream live;
    ProgressLogger bar(live, /*live_bar=*/true, columns);
    bar.on_train_begin(h.state);
    h.state.epoch = 1;
    bar.on_epoch_begin(h.state);
    bar.on_batch_end(h.state, 5, {.loss_sum = 123.456, .correct = 9, .count = 10});
    const std::string drawn = live.str();
    const std::size_t at = drawn.rfind("\033[K");
    ASSERT_NE(at, std::string::npos);
    const std::string line = drawn.substr(at + 3);
    EXPECT_LT(line.size(), static_cast<std::size_t>(columns)) << line;
    EXPECT_EQ(line.find('\n'), std::string::npos);
    EXPECT_EQ(line.rfind("Epoch 1/10", 0), 0u) << line;
    if (columns == 80) {
      EXPECT_NE(line.find("ETA"), std::string::npos) << line;
    }
  }
  Harness h;
  std::ostringstream live;
  ProgressLogger bar(live, /*live_bar=*/true, 80);
  h.state.epoch = 1;
  bar.on_epoch_begin(h.state);
  bar.on_evaluate_batch(h.state, 1);
  EXPECT_NE(live.str().find("Epoch 1/10 evaluating 1 batch"), std::string::npos) << live.str();
  h.epoch(bar, 1.0f, 0.5);
  EXPECT_NE(live.str().find("acc "), std::string::npos) << live.str();  // the epoch line has the train accuracy
}

}  // namespace convoy::train

#include "convoy/io/safetensors.h"
#include "convoy/train/checkpoint.h"

namespace convoy::train {

TEST(CheckpointSaver, SaveBestOnlyKeepsTheBestEpochsWeights) {
  testing::TempDir dir;
  Harness h;
  CheckpointSaver best(dir.file("best.safetensors"), h.model, "{}", {.save_best_only = true, .monitor = "val_loss"});
  h.epoch(best, 1.0f, 0.9);
  h.epoch(best, 2.0f, 0.5);  // best
  h.epoch(best, 3.0f, 0.7);
  const io::NamedTensors t = io::read_safetensors(dir.file("best.safetensors"));
  EXPECT_EQ(t.at("dense_0.weight").data<float>()[0], 2.0f);
}

}  // namespace convoy::train
