#pragma once
// The run workflow as a library object: everything `convoy train` does, in
// the calls a C++ program makes. The CLI is a thin layer over it
// (app/run.h), so a program gets the same run from the same RunConfig:
// data and model from the config, replicas (training.replicas, dist.*),
// transfer learning's phases (transfer.freeze_epochs: frozen, recompiled,
// unfrozen, their epochs counted against training.epochs), checkpoints
// (every epoch, every training.checkpoint_every_steps steps, and on
// SIGINT/SIGTERM), resuming bit for bit from a checkpoint, and the outputs
// (summary.json, model.safetensors, plots, report.html, submission.csv).
//
//   train::Workflow run(config, &my_events);   // validates, takes --out, loads the data, builds the model
//   run.start(resume);                         // compiles the first (or the checkpoint's) phase
//   while (run.fit_phase()) run.next_phase();  // each phase; next_phase recompiles keeping the weights
//   train::RunOutcome out = run.finish();      // evaluation and outputs
//
// or run.run(resume) for all four. The library prints nothing: what a run
// has to say goes to the RunEvents the caller passes (nullptr: nobody), and
// progress is whatever Callbacks the events or the caller install.
// train::ConsoleReporter (console_reporter.h) is the CLI's console.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/nn/model.h"
#include "convoy/train/callbacks.h"
#include "convoy/app/run_checkpoint.h"
#include "convoy/train/evaluation.h"
#include "convoy/app/run.h"
#include "convoy/config/run_config.h"

namespace convoy::train {

// The run about to train, as its first line tells it.
struct RunHeader {
  RunConfig config;          // as it trains: scaled for replicas
  std::string data_name;     // "Fashion-MNIST" or the data folder
  bool validation = false;   // the held-out split is a validation split (image data), not a test set
  int64_t train_examples = 0, held_out_examples = 0;
  std::string device;
  int threads = 0;
  bool resumed = false;                            // from a checkpoint: after
  int64_t resumed_epochs = 0, resumed_steps = 0;  // these epochs, and these steps of the next
  int process_replicas = 1;                        // data-parallel processes (dist.*)
  std::string strategy;                            // their strategy's name
};

// What a run tells whoever watches it. Every method does nothing unless
// overridden; only the primary replica's events are called (warnings() is
// asked by every replica).
class RunEvents {
 public:
  virtual ~RunEvents() = default;
  // The device "auto" (when this machine has a GPU) or a named plugin fell
  // back from, and why. Each run's first compile says it.
  virtual void device_fallback(const std::string& /*why*/) {}
  virtual void class_weights(const std::vector<double>& /*weights*/, const std::vector<std::string>& /*classes*/) {}
  // Examples left out of training (data.on_bad_example: skip), each "file: why".
  virtual void skipped_examples(const std::vector<std::string>& /*skipped*/) {}
  virtual void pretrained_loaded(int /*tensors*/, const std::string& /*file*/, const std::string& /*head*/) {}
  virtual void run_begins(const RunHeader&) {}
  // Transfer learning: epochs 1..frozen_until train the head alone; then
  // (fine_tune_lr > 0) every layer at that rate.
  virtual void transfer_planned(const std::string& /*head*/, int64_t /*frozen_until*/, double /*fine_tune_lr*/) {}
  // A later phase begins at `first_epoch` with every layer training
  // (batch norms on running statistics when batch_norms_stay).
  virtual void phase_begins(int64_t /*first_epoch*/, bool /*batch_norms_stay*/) {}
  // Callbacks that show a phase's fit (a progress display), made for each
  // phase, and where EarlyStopping says it stopped (nullptr: nowhere).
  virtual Callbacks fit_callbacks(const RunConfig&) { return {}; }
  virtual std::ostream* early_stopping_log() { return nullptr; }
  // Where every replica's warnings from training go (a skipped non-finite
  // step, a reduced learning rate; FitOptions::warnings). nullptr: nowhere.
  virtual std::ostream* warnings() { return nullptr; }
  // training.profile: the per-op table and the replicas' communication.
  virtual void profiled(const std::string& /*table*/) {}
  // Training ended: the kept weights on the held-out split.
  virtual void finished(const History&, const EvaluationReport&, const std::vector<std::string>& /*classes*/,
                        const std::string& /*split*/) {}
  // Rows of data.test_csv left out of submission.csv.
  virtual void submission_skipped(const std::vector<std::string>& /*skipped*/) {}
  // The outputs written into `dir`, by name.
  virtual void wrote(const std::string& /*dir*/, const std::vector<std::string>& /*files*/) {}
  // transfer.compare_with_scratch: the scratch run starts (out_dir: its
  // folder, or empty), and, when it is done, the pretrained one.
  virtual void scratch_begins(const RunConfig& /*run*/, const std::string& /*out_dir*/) {}
  virtual void scratch_done(const RunConfig& /*run*/) {}
  // A line about the run as a whole (a resume that has nothing to do, a
  // schedule re-planned for new epochs).
  virtual void notice(const std::string& /*line*/) {}
};

class Workflow {
 public:
  // Validates `config`, takes its output folder (one run per folder: a lock;
  // a run that fails before its first checkpoint leaves the folder as it
  // found it), sets the thread count, loads the data and builds the model.
  // `callbacks` join every phase's fit, before the checkpoint savers (one
  // that sets FitState::interrupted stops the run with a checkpoint, as a
  // signal does). `faults`: the crash tests' pacing (run.h). Each a UserError
  // naming the setting on a mistake.
  explicit Workflow(const RunConfig& config, RunEvents* events = nullptr, Callbacks callbacks = {},
                    const FaultInjection& faults = {});
  ~Workflow();
  Workflow(const Workflow&) = delete;
  Workflow& operator=(const Workflow&) = delete;

  // Compiles the phase to train: the first, with fresh or model.pretrained
  // weights, or the checkpoint's, with its weights, optimizer state,
  // learning rate and history (the checkpoint must be this config's run:
  // RunCheckpoint::config).
  void start(const std::optional<RunCheckpoint>& resume = std::nullopt);
  // Trains the current phase to its last epoch. True when another phase
  // follows (call next_phase()); false when the run ended: all its epochs,
  // early stopping, a stop (signal or callback) or a numerical fault.
  bool fit_phase();
  // The next phase: every layer trains, from the weights so far, with a fresh
  // optimizer state (as Keras's compile before fine-tuning).
  void next_phase();
  // Ends the run: a numerical fault throws UserError (the last good weights
  // in model.safetensors); else the kept weights are evaluated and, with an
  // output folder, summary.json, model.safetensors, the plots, report.html
  // and submission.csv written. `scratch`: the history of the same model
  // trained from random weights, compared in the report.
  RunOutcome finish(const std::optional<History>& scratch = std::nullopt);
  // start, every phase, finish.
  RunOutcome run(const std::optional<RunCheckpoint>& resume = std::nullopt,
                 const std::optional<History>& scratch = std::nullopt);

  // The config as checkpoints record it (the data's classes filled in).
  const RunConfig& config() const;
  const nn::Model& model() const;
  // The current phase's program; throws before start().
  Executable& executable();
  const History& history() const;
  std::size_t phase() const;         // 0-based
  std::size_t phase_count() const;   // 2 with transfer.freeze_epochs below training.epochs, else 1

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace convoy::train
