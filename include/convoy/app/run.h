#pragma once
// A whole run from a RunConfig: data, model, compile, callbacks, fit, outputs.
// The CLI is a thin layer over these, and these over train::Workflow
// (workflow.h), which a program can also drive step by step.
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "convoy/config/run_config.h"

namespace convoy::train {

class RunEvents;  // workflow.h

// Pacing for the CLI's crash tests (tests/kill_resume.sh, resume.sh,
// graceful_stop.sh): each training step sleeps step_delay_ms after it runs,
// so runs killed at random instants last as long on an idle machine as on a
// loaded one; each checkpoint write pauses checkpoint_pause_ms between its
// flushed temporary file and the rename, so kills land inside writes. So
// that signals land outside the steps (tests/signal_phases.sh), a run pauses
// load_pause_ms before it loads its data and report_pause_ms after its final
// evaluation, before model.safetensors and the reports. The CLI reads them
// from CONVOY_TEST_STEP_DELAY_MS, CONVOY_TEST_CHECKPOINT_DELAY_MS,
// CONVOY_TEST_LOAD_DELAY_MS and CONVOY_TEST_REPORT_DELAY_MS; the library
// never reads the environment.
struct FaultInjection {
  int step_delay_ms = 0;
  int checkpoint_pause_ms = 0;
  int load_pause_ms = 0;
  int report_pause_ms = 0;
};

struct RunOutcome {
  History history;
  std::string device;
  int threads = 0;
  // SIGINT or SIGTERM stopped the run after a step; its checkpoint has the
  // position (`convoy train --resume DIR` continues it). 0: it was not stopped.
  // (A callback's stop, FitState::interrupted, is history.interrupted with 0 here.)
  int stopped_by_signal = 0;
  int replicas = 1;      // data-parallel replicas that trained together
  bool primary = true;   // this process is the replica that prints and writes
};

// Trains as configured, telling `events` (nullptr: nobody) what happens;
// with transfer.compare_with_scratch, first the same model from random
// weights (in OUT/scratch). The `log` overload prints what `convoy train`
// prints (ConsoleReporter, console_reporter.h) on `log`. With config.out_dir set:
// checkpoint.safetensors and history.csv after every epoch (and every
// checkpoint_every_steps steps), and at the end summary.json and
// model.safetensors. A NaN/Inf with on_nan: stop writes the last good weights
// to model.safetensors and throws UserError saying where it appeared.
RunOutcome run_training(const RunConfig& config, RunEvents* events, const FaultInjection& faults = {});
RunOutcome run_training(const RunConfig& config, std::ostream& log, const FaultInjection& faults = {});

// Continues the run whose checkpoint is in `dir` (its own config; outputs go
// back to `dir`). Same seed and thread count: the same weights as a run that
// was never interrupted.
// `adjust` may change how the run continues (not what it trains: e.g. the
// distribution strategy) before it starts. epochs > 0 continues to that epoch
// (Keras's initial_epoch): with a constant learning rate or a step schedule
// the weights are those of a run that asked for `epochs` from the start; a
// cosine or one-cycle schedule is re-planned (it says so). A finished run
// (all its epochs, or ended by early stopping) says so (RunEvents::notice) and returns
// an empty outcome.
RunOutcome resume_training(const std::string& dir, RunEvents* events,
                           const std::function<void(RunConfig&)>& adjust = nullptr, int64_t epochs = 0,
                           const FaultInjection& faults = {});
RunOutcome resume_training(const std::string& dir, std::ostream& log,
                           const std::function<void(RunConfig&)>& adjust = nullptr, int64_t epochs = 0,
                           const FaultInjection& faults = {});

// The names a run writes into its output folder (files, and the folders
// tensorboard/ and scratch/); nothing else there is touched.
std::vector<std::string> run_outputs();
// Those of them that `dir` holds now (an earlier run's, or a user's files of
// those names), sorted; empty when `dir` is missing. Left out: tensorboard/
// (each start writes new files there) and history.csv (a run killed before
// its first checkpoint leaves it, with nothing to resume).
std::vector<std::string> earlier_outputs(const std::string& dir);
// A new run (not a resume) into config.out_dir refuses a folder that holds
// earlier_outputs() unless config.overwrite (output.overwrite, --overwrite):
// a UserError naming them and what to do (a run writing there now is named
// as its lock names it). Workflow::start checks it for every new run, and
// run_training before anything trains; call it to fail before loading data.
void check_new_run_folder(const RunConfig& config);

// Inference-mode loss and accuracy of the checkpoint in `dir` on its test data.
Metrics evaluate_checkpoint(const std::string& dir);

}  // namespace convoy::train
