#pragma once
// Callbacks: code that watches training and may steer it, as Keras's. The fit
// loop calls them at train/epoch begin and end and after every batch; any of
// them may ask training to stop after the current epoch.
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"

namespace convoy::train {

struct EpochRecord {
  int64_t epoch = 0;  // 1-based
  double train_loss = 0, train_accuracy = 0;
  double test_loss = 0, test_accuracy = 0;  // on the validation data
  double train_seconds = 0;                 // the training pass alone (no evaluation)
  double images_per_second = 0;
  double lr = 0;
  double input_wait_seconds = 0;  // of train_seconds, spent waiting for the input pipeline
};

struct History {
  std::vector<EpochRecord> epochs;
  double total_train_seconds = 0;  // the whole fit: training and evaluation passes
  int64_t images_trained = 0;
  double images_per_second() const;  // over the training passes
  // Share of the training passes' wall time the step loop waited for a batch.
  double input_wait_fraction() const;
};

// A monitored quantity by its Keras name: "loss", "accuracy", "val_loss",
// "val_accuracy" (validation = the test data passed to fit). Throws UserError
// for any other name.
double metric_value(const EpochRecord& r, const std::string& name);
void check_metric_name(const std::string& name, const std::string& where);

// What callbacks see and may change.
struct FitState {
  Executable& exe;
  History& history;
  int64_t epoch = 0;   // the current epoch, 1-based
  int64_t epochs = 0;  // the last epoch this fit will run
  int64_t steps_per_epoch = 0;
  int64_t batch_size = 0;
  bool stop_training = false;
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(FitState&) {}
  virtual void on_epoch_begin(FitState&) {}
  // After step `step` (1-based) of the epoch; `running` sums this epoch so far.
  virtual void on_batch_end(FitState&, int64_t step, const Metrics& running) {}
  virtual void on_epoch_end(FitState&, const EpochRecord&) {}
  virtual void on_train_end(FitState&) {}
};

using Callbacks = std::vector<std::shared_ptr<Callback>>;

// Stops when `monitor` has not improved by more than min_delta for `patience`
// epochs; mode "min", "max" or "auto" (max for accuracies). With
// restore_best_weights, the parameters and BN statistics of the best epoch are
// put back when it stops (Keras's semantics).
struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  std::string mode = "auto";
  int64_t patience = 0;
  double min_delta = 0;
  bool restore_best_weights = false;
};

class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options);
  void on_train_begin(FitState&) override;
  void on_epoch_end(FitState&, const EpochRecord&) override;
  int64_t best_epoch() const { return best_epoch_; }
  int64_t stopped_epoch() const { return stopped_epoch_; }

 private:
  bool improved(double value) const;
  EarlyStoppingOptions options_;
  bool maximize_;
  double best_ = 0;
  int64_t best_epoch_ = 0, stopped_epoch_ = 0, wait_ = 0;
  std::vector<float> best_params_, best_state_;
};

// Stops at the first batch whose running loss is NaN or infinite.
class TerminateOnNaN : public Callback {
 public:
  void on_batch_end(FitState&, int64_t step, const Metrics& running) override;
  bool triggered() const { return triggered_; }

 private:
  bool triggered_ = false;
};

// Rewrites `path` (atomically) after every epoch: one CSV row per epoch.
class CsvLogger : public Callback {
 public:
  explicit CsvLogger(std::string path) : path_(std::move(path)) {}
  void on_epoch_end(FitState&, const EpochRecord&) override;

 private:
  std::string path_;
};

// TensorBoard scalars under `dir`: loss and accuracy per epoch for training
// and validation, the learning rate, and the running training loss every
// `every_steps` steps.
class TensorBoardLogger : public Callback {
 public:
  explicit TensorBoardLogger(const std::string& dir, int64_t every_steps = 50);
  ~TensorBoardLogger() override;
  void on_batch_end(FitState&, int64_t step, const Metrics& running) override;
  void on_epoch_end(FitState&, const EpochRecord&) override;

 private:
  struct Writers;
  std::unique_ptr<Writers> w_;
  int64_t every_;
};

// Keras-style progress: on a terminal a live bar per epoch (steps, ETA,
// running loss and accuracy, images/s), then one line per epoch; elsewhere
// (CI logs, files) only the per-epoch lines.
class ProgressLogger : public Callback {
 public:
  ProgressLogger(std::ostream& out, bool live_bar);
  void on_epoch_begin(FitState&) override;
  void on_batch_end(FitState&, int64_t step, const Metrics& running) override;
  void on_epoch_end(FitState&, const EpochRecord&) override;

 private:
  std::ostream& out_;
  bool live_;
  double epoch_start_ = 0, last_draw_ = 0;
};

}  // namespace convoy::train
