#pragma once
// Callbacks: code that watches training and may steer it, as Keras's. The fit
// loop calls them at train/epoch begin and end and after every batch; any of
// them may ask training to stop after the current epoch.
#include <cstdint>
#include <memory>
#include <optional>
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

// A NaN or Inf caught by the numerical guard (see Executable::last_step_finite).
struct NumericalFault {
  int64_t epoch = 0, step = 0;  // 1-based; step within the epoch
  std::string where;            // where it first showed, e.g. "the forward output of conv2d_0"
  // A finite loss far above its running level (DivergenceWatch): the update
  // that caused it was applied, so the weights are not worth keeping.
  bool diverged = false;
};

struct History {
  std::vector<EpochRecord> epochs;
  double total_train_seconds = 0;  // the whole fit: training and evaluation passes
  int64_t images_trained = 0;
  int64_t skipped_steps = 0;            // updates not applied for non-finite values (on_nan: skip_step)
  std::optional<NumericalFault> fault;  // set when on_nan: stop ended the fit (weights: the last good step's)
  bool interrupted = false;             // a callback stopped the fit mid-epoch (FitState::interrupted)
  // Early stopping ended the fit after this epoch (0: it did not), and the
  // epoch whose weights the model then holds (restore_best_weights; 0: the last).
  int64_t stopped_epoch = 0, weights_epoch = 0;
  // The record of the epoch whose weights the model holds: what a run reports.
  const EpochRecord& kept() const;
  double images_per_second() const;  // over the training passes
  // Share of the training passes' wall time the step loop waited for a batch.
  double input_wait_fraction() const;
};

// A monitored quantity by its Keras name: "loss", "accuracy", "val_loss",
// "val_accuracy" (validation = the test data passed to fit). Throws UserError
// for any other name.
double metric_value(const EpochRecord& r, const std::string& name);
void check_metric_name(const std::string& name, const std::string& where);

// How far an epoch has got: what a mid-epoch checkpoint keeps and a resumed
// fit starts from, so that it continues as if never stopped.
struct EpochProgress {
  int64_t step = 0;  // steps done (batches consumed, skipped ones included)
  Metrics metrics;   // their running sums
  double train_seconds = 0, input_wait_seconds = 0;
};

// What callbacks see and may change.
struct FitState {
  Executable& exe;
  History& history;
  int64_t epoch = 0;   // the current epoch, 1-based
  int64_t epochs = 0;  // the last epoch this fit will run
  int64_t run_epochs = 0;  // the last epoch of the whole run (>= epochs; FitOptions::run_epochs)
  int64_t steps_per_epoch = 0;
  int64_t batch_size = 0;
  bool stop_training = false;  // stop after the current epoch (after its evaluation and epoch-end callbacks)
  // Steps done in the current epoch, and the epoch's time so far.
  int64_t step = 0;
  double epoch_train_seconds = 0, epoch_input_wait_seconds = 0;
  // Stop now, mid-epoch: no evaluation and no epoch end for the unfinished
  // epoch (a signal asked to stop; a checkpoint keeps the position).
  bool interrupted = false;
  // Where the loop and callbacks send warnings (a skipped non-finite step, a
  // reduced learning rate), one line each: FitOptions::warnings; nullptr: nowhere.
  std::ostream* warnings = nullptr;
  EpochProgress progress() const {
    return {.step = step, .metrics = exe.metrics(Metrics::keep_running), .train_seconds = epoch_train_seconds,
            .input_wait_seconds = epoch_input_wait_seconds};
  }
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(FitState&) {}
  virtual void on_epoch_begin(FitState&) {}
  // After every training step (s.step is its 1-based number in the epoch);
  // keep it cheap. May set s.interrupted.
  virtual void on_step_end(FitState&) {}
  // After step `step` (1-based) of the epoch; `running` sums this epoch so far.
  virtual void on_batch_end(FitState&, int64_t step, const Metrics& running) {}
  // During the epoch's evaluation pass, after each of its batches (1-based count).
  virtual void on_evaluate_batch(FitState&, int64_t batches_done) {}
  virtual void on_epoch_end(FitState&, const EpochRecord&) {}
  virtual void on_train_end(FitState&) {}
};

using Callbacks = std::vector<std::shared_ptr<Callback>>;

// One line to s.warnings, when there is one.
void warn(const FitState& s, const std::string& line);

// Stops when `monitor` has not improved by more than min_delta for `patience`
// epochs; mode "min", "max" or "auto" (max for accuracies). With
// restore_best_weights, the parameters and BN statistics of the best epoch are
// put back when it stops (Keras's semantics). A resumed fit replays the
// history's epochs first, so it stops at the same epoch as an uninterrupted one.
struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  std::string mode = "auto";
  int64_t patience = 0;
  double min_delta = 0;
  bool restore_best_weights = false;
};

class EarlyStopping : public Callback {
 public:
  // log: where Keras's "Epoch 39: early stopping" and "Restoring model
  // weights from the end of the best epoch: 19." go (nullptr: nowhere).
  explicit EarlyStopping(EarlyStoppingOptions options, std::ostream* log = nullptr);
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
  std::ostream* log_ = nullptr;
  std::vector<float> best_params_, best_state_;
};

// Stops at the first batch whose running loss is NaN or infinite. The fit
// loop's numerical guard (FitOptions::on_nan) now catches such steps before
// their update and keeps them out of the metrics; this stays for custom loops.
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

// Keras-style progress: on a terminal a live bar per epoch that fits the
// terminal's width (never wrapping: one line, redrawn in place), headed by
// the epoch ("Epoch 3/40"), with steps, the epoch's and the whole run's ETA,
// running loss and accuracy and images/s, then an "evaluating" state with its
// own batch count; after each epoch one line with train and validation loss
// and accuracy. Elsewhere (CI logs, files) only the per-epoch lines.
class ProgressLogger : public Callback {
 public:
  // columns: the width to fit; 0 = the terminal's (stdout), else $COLUMNS, else 80.
  ProgressLogger(std::ostream& out, bool live_bar, int columns = 0);
  void on_train_begin(FitState&) override;
  void on_epoch_begin(FitState&) override;
  void on_batch_end(FitState&, int64_t step, const Metrics& running) override;
  void on_evaluate_batch(FitState&, int64_t batches_done) override;
  void on_epoch_end(FitState&, const EpochRecord&) override;
  void on_train_end(FitState&) override;

 private:
  void draw(const std::string& head, const std::vector<std::string>& tails, double fraction);
  std::ostream& out_;
  bool live_;
  int columns_;
  double train_start_ = 0, epoch_start_ = 0, last_draw_ = 0;
  int64_t first_epoch_ = 0;           // the epoch this fit started at (a resumed run's ETA counts from it)
  int64_t evaluation_batches_ = 0;    // the last epoch's, the next evaluation's expected count
};

}  // namespace convoy::train
