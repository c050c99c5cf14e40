// The CLI's runs (run.h) as calls on train::Workflow (workflow.h): a fresh
// run, a resumed one, and transfer learning's comparison with a run from
// scratch. What they say goes to RunEvents.
#include "convoy/app/run.h"

#include <filesystem>
#include <iostream>
#include <optional>

#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/app/run_checkpoint.h"
#include "convoy/app/console_reporter.h"
#include "convoy/app/image_data.h"
#include "convoy/app/workflow.h"
#include "app/compile_run.h"
#include "app/preflight.h"
#include "app/restore.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

// Where a damaged checkpoint's fallback is told: the events' warnings, else nowhere.
std::ostream& warnings_of(RunEvents* events) {
  static std::ostream nowhere(nullptr);
  return events && events->warnings() ? *events->warnings() : nowhere;
}

RunOutcome run(const RunConfig& c, const std::optional<RunCheckpoint>& resume, RunEvents* events,
               const FaultInjection& faults, const std::optional<History>& scratch = std::nullopt) {
  return Workflow(c, events, {}, faults).run(resume, scratch);
}

// transfer.compare_with_scratch: the same model, data, epochs and rate from
// random weights with every layer training, in OUT/scratch (a run of its own,
// first). A resumed comparison reuses it when it finished and resumes it when
// it had started; a stop inside it leaves only its checkpoint, so the
// comparison then starts again from the beginning.
RunOutcome run_scratch(const RunConfig& c, RunEvents* events, bool resuming, const FaultInjection& faults) {
  RunConfig s = c;
  s.pretrained.clear();
  s.freeze_epochs = 0;
  s.fine_tune_lr = 0;
  s.compare_with_scratch = false;
  if (!c.out_dir.empty()) s.out_dir = (fs::path(c.out_dir) / "scratch").string();
  const bool reusable = resuming && !s.out_dir.empty();
  if (reusable && fs::exists(fs::path(s.out_dir) / "summary.json")) {
    RunOutcome done;
    done.history = load_latest_checkpoint(s.out_dir, warnings_of(events)).history;
    return done;
  }
  if (events) events->scratch_begins(c, s.out_dir);
  RunOutcome o = reusable && fs::exists(fs::path(s.out_dir) / kCheckpointFile)
                     ? run(s, load_latest_checkpoint(s.out_dir, warnings_of(events)), events, faults)
                     : run(s, std::nullopt, events, faults);
  if (!o.history.interrupted && events) events->scratch_done(c);
  return o;
}

RunOutcome run_compared(const RunConfig& c, const std::optional<RunCheckpoint>& resume, RunEvents* events,
                        const FaultInjection& faults) {
  check_before_training(c);  // before the scratch comparison trains
  if (!resume) check_new_run_folder(c);
  if (!c.compare_with_scratch) return run(c, resume, events, faults);
  RunOutcome scratch = run_scratch(c, events, resume.has_value(), faults);
  if (scratch.history.interrupted) return scratch;
  return run(c, resume, events, faults, std::move(scratch.history));
}

}  // namespace

RunOutcome run_training(const RunConfig& config, RunEvents* events, const FaultInjection& faults) {
  return run_compared(config, std::nullopt, events, faults);
}

RunOutcome run_training(const RunConfig& config, std::ostream& log, const FaultInjection& faults) {
  ConsoleReporter console(log, config.progress, &std::cerr);
  return run_training(config, &console, faults);
}

RunOutcome resume_training(const std::string& dir, RunEvents* events, const std::function<void(RunConfig&)>& adjust,
                           int64_t epochs, const FaultInjection& faults) {
  const auto say = [&](const std::string& line) {
    if (events) events->notice(line);
  };
  RunCheckpoint ck = load_latest_checkpoint(dir, warnings_of(events));
  ck.config.out_dir = dir;
  if (adjust) adjust(ck.config);
  const bool unfinished_epoch = ck.progress.step > 0;
  // A run whose training ended but whose reports were never all written (a
  // full disk at the end) is not finished: resuming writes them.
  const bool reported = fs::exists(fs::path(dir) / "summary.json");
  if (ck.history.stopped_epoch > 0 && reported) {  // early stopping ended it: its patience is spent
    say("convoy: " + dir + " is finished: early stopping ended it after epoch " +
        std::to_string(ck.history.stopped_epoch) + " (its weights are epoch " + std::to_string(ck.history.kept().epoch) +
        "'s); nothing to resume");
    return {};
  }
  if (epochs > 0) {
    // Equal to the epochs trained (at an epoch boundary) asks for the run as
    // it is: the reports a full disk kept from being written are written, and
    // a reported run is "finished", exit 0, below (retry wrappers repeat the
    // same --epochs N). Fewer, or as many while a checkpoint is already part
    // way into the next epoch, cannot be had: refused.
    require(epochs > ck.epoch || (epochs == ck.epoch && !unfinished_epoch),
            "--epochs " + std::to_string(epochs) + ": " + dir + " has already trained " + std::to_string(ck.epoch) +
                (unfinished_epoch ? " epochs and part of epoch " + std::to_string(ck.epoch + 1) : " epochs") +
                "; give more to continue it");
    if (epochs != ck.config.epochs && (ck.config.schedule.kind == "cosine" || ck.config.schedule.kind == "one_cycle"))
      say("convoy: note: the " + ck.config.schedule.kind + " schedule spans the run's epochs, so with --epochs " +
          std::to_string(epochs) + " the learning rates from epoch " + std::to_string(ck.epoch + 1) +
          " on differ from the first run's plan (and from a run that asked for " + std::to_string(epochs) +
          " at the start)");
    ck.config.epochs = epochs;
  }
  if (ck.epoch >= ck.config.epochs && !unfinished_epoch && reported) {
    say("convoy: " + dir + " is finished: it trained all " + std::to_string(ck.config.epochs) +
        " epochs; nothing to resume (add --epochs N to train on to epoch N)");
    return {};
  }
  return run_compared(ck.config, ck, events, faults);
}

RunOutcome resume_training(const std::string& dir, std::ostream& log, const std::function<void(RunConfig&)>& adjust,
                           int64_t epochs, const FaultInjection& faults) {
  // The console follows the resumed run's own progress setting (after `adjust`).
  ConsoleReporter console(log, "auto", &std::cerr);
  return resume_training(dir, &console, [&](RunConfig& c) {
    if (adjust) adjust(c);
    console.set_progress(c.progress);
  }, epochs, faults);
}

// A checkpoint's model compiled with its weights, ready for inference.
std::unique_ptr<Executable> restore(const RunCheckpoint& ck) {
  set_num_threads(ck.config.threads);
  RunConfig c = ck.config;
  // In the run's precision, so `evaluate` repeats its accuracy; where bf16 cannot
  // run, from the same fp32 master weights in fp32 (predictions differ only in rounding).
  if (c.precision == "bf16" && !cpu_bf16_missing().empty()) c.precision = "fp32";
  auto exe = compile_for(build_model(c, model_input_shape(c), model_classes(c)), c, 0);
  exe->internals().write(Held::parameters, ck.params);
  exe->internals().write(Held::state, ck.state);
  return exe;
}

Metrics evaluate_checkpoint(const std::string& dir) {
  const RunCheckpoint ck = load_latest_checkpoint(dir, std::cerr);
  if (ck.config.data.reads_images())  // the run's validation split, rebuilt from its seed
    return evaluate(*restore(ck), load_image_data(ck.config, /*with_training=*/false).validation);
  const data::TrainTest data = data::load_fashion_mnist(ck.config.data_dir);
  return evaluate(*restore(ck), data.test);
}

}  // namespace convoy::train
