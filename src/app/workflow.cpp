// train::Workflow (workflow.h): a run from its config, step by step. What
// it has to say goes to RunEvents; it never prints.
#include "convoy/app/workflow.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/dist/data_parallel.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/model_weights.h"
#include "convoy/io/output_folder.h"
#include "convoy/io/pretrained.h"
#include "convoy/report/run_report.h"
#include "convoy/train/fit.h"
#include "convoy/app/graceful_stop.h"
#include "convoy/app/image_data.h"
#include "convoy/train/profile_report.h"
#include "convoy/app/replicas.h"
#include "convoy/train/schedules.h"
#include "app/compile_run.h"
#include "app/fault_injection.h"
#include "app/preflight.h"
#include "app/run_reports.h"
#include "config/transfer.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

RunEvents& nobody() {
  static RunEvents none;
  return none;
}

// `saved` is the config checkpoints record (before scaling for replicas), as
// JSON text.
// Replicas other than the primary get only the callbacks that steer training
// (fit makes them agree on stopping); what shows progress and the files are
// the primary's.
Callbacks make_callbacks(const RunConfig& c, const std::string& saved, const nn::Model& model, RunEvents& events,
                         const Callbacks& given, const FaultInjection& faults, bool primary) {
  Callbacks cbs;
  if (auto pacer = step_pacer(faults.step_delay_ms)) cbs.push_back(pacer);
  cbs.push_back(std::make_shared<StopOnSignal>());  // before the checkpoint saver: it sees the interruption
  if (primary) {
    const Callbacks shown = events.fit_callbacks(c);
    cbs.insert(cbs.end(), shown.begin(), shown.end());
  }
  cbs.insert(cbs.end(), given.begin(), given.end());
  if (c.terminate_on_nan && primary) cbs.push_back(std::make_shared<TerminateOnNaN>());
  if (c.early_stopping)
    cbs.push_back(std::make_shared<EarlyStopping>(*c.early_stopping, primary ? events.early_stopping_log() : nullptr));
  if (c.schedule.active()) cbs.push_back(std::make_shared<LearningRateScheduler>(c.schedule, c.lr));
  if (c.reduce_lr_on_plateau) cbs.push_back(std::make_shared<ReduceLrOnPlateau>(*c.reduce_lr_on_plateau));
  if (!c.out_dir.empty() && primary) {
    cbs.push_back(std::make_shared<CsvLogger>((fs::path(c.out_dir) / "history.csv").string()));
    cbs.push_back(std::make_shared<TensorBoardLogger>((fs::path(c.out_dir) / "tensorboard").string()));
    cbs.push_back(std::make_shared<CheckpointSaver>(
        (fs::path(c.out_dir) / kCheckpointFile).string(), model, saved,
        CheckpointSaverOptions{.every_steps = c.checkpoint_every_steps,
                               .keep_previous = true,
                               .pause_before_rename_ms = faults.checkpoint_pause_ms}));
    // The best epoch's weights by validation loss, beside the latest.
    cbs.push_back(std::make_shared<CheckpointSaver>((fs::path(c.out_dir) / "best.safetensors").string(), model, saved,
                                                    CheckpointSaverOptions{.save_best_only = true,
                                                                           .monitor = "val_loss",
                                                                           .pause_before_rename_ms = faults.checkpoint_pause_ms}));
  }
  return cbs;
}

// on_nan: stop (or a diverged step). The faulty step changed nothing, so the weights are the last
// good step's: write them, then fail with one line saying where and what to do.
[[noreturn]] void stop_for_fault(const NumericalFault& fault, const RunConfig& c, const nn::Model& model,
                                 const Executable& exe, io::FolderGuard* folder) {
  std::vector<float> params(model.num_parameters()), state(model.num_state());
  exe.internals().read(Held::parameters, params);
  exe.internals().read(Held::state, state);
  const auto finite = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
  };
  std::string kept = "; nothing written (no --out)";
  if (fault.diverged) {  // its update was applied: nothing here is worth keeping
    throw UserError(describe(fault) + "; stopped, model.safetensors not written; lower the learning rate or check "
                                      "the data");
  } else if (!finite(params) || !finite(state)) {
    // An earlier update overflowed the weights themselves (finite gradients
    // times a huge learning rate): they are not worth keeping.
    kept = "; the weights had already overflowed, so model.safetensors was not written (checkpoints hold earlier ones)";
  } else if (!c.out_dir.empty()) {
    const std::string path = (fs::path(c.out_dir) / "model.safetensors").string();
    io::write_safetensors(path, io::to_named(model, params, state));
    if (folder) folder->keep();  // the message points to them
    kept = "; the last good weights are in " + path;
  }
  throw UserError(describe(fault) + "; stopped (on_nan: stop)" + kept +
                  "; lower the learning rate, check the data, or set callbacks.on_nan: skip_step");
}

// The model must meet its data before the first step: the data's example
// shape is its input, its output has one value per class (a label past it
// would index out of the loss's row), and the loss reads what it outputs.
void check_model_meets_data(const nn::Model& model, const RunConfig& c, const Shape& example, int64_t classes) {
  const std::string name = "model '" + (c.layers.empty() ? c.model : std::string("model.layers")) + "'";
  require(model.input_shape() == example,
          name + " takes " + to_string(model.input_shape()) + " inputs but the data's examples are " +
              to_string(example) + "; give the data that shape (data.channels, width, height) or use a model for it");
  const Shape& out = model.output_shape();
  require(out.size() == 1 && out[0] == classes,
          name + " outputs " + to_string(out) + " but the data has " + std::to_string(classes) +
              " classes; use a model with a head of " + std::to_string(classes) + " (zoo models size theirs)");
  const bool log_probabilities = std::holds_alternative<nn::LogSoftmax>(model.layers().back().layer);
  const Loss loss = loss_kind(c);
  if (loss == Loss::nll)
    require(log_probabilities, "loss " + c.loss + " reads log-probabilities but " + name +
                                   " ends in logits (no log_softmax); set loss.from_logits: true with "
                                   "categorical_crossentropy, or end the model with log_softmax");
  else
    require(!log_probabilities, "loss " + c.loss + " with from_logits reads logits but " + name +
                                    " ends in log_softmax; use loss nll, or drop the log_softmax");
}

// Every tensor but the head's from model.pretrained (Keras' include_top=False):
// the head is sized for this data's classes and starts from fresh weights.
void load_pretrained(Executable& exe, const nn::Model& model, const RunConfig& c, RunEvents& events) {
  io::FlatWeights w{std::vector<float>(model.num_parameters()), std::vector<float>(model.num_state())};
  exe.internals().read(Held::parameters, w.params);
  exe.internals().read(Held::state, w.state);
  const std::string head = head_of(model, c);
  const int loaded = io::load_pytorch_weights(model, c.pretrained, w, {.skip_prefixes = {head + "."}});
  exe.internals().write(Held::parameters, w.params);
  exe.internals().write(Held::state, w.state);
  events.pretrained_loaded(loaded, c.pretrained, head);
}

}  // namespace

// A failed run's FolderGuard removes only these.
std::vector<std::string> run_outputs() {
  return {kCheckpointFile, kPreviousCheckpointFile, "best.safetensors", "model.safetensors", "history.csv",
          "tensorboard",   "summary.json",          "curves.png",       "predictions.png",   "confusion.png",
          "comparison.png", "report.html",          "submission.csv",   "scratch"};
}

std::vector<std::string> earlier_outputs(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const std::string& name : run_outputs())
    // Not evidence of a run worth keeping: TensorBoard files get new names at
    // each start (none is replaced), and history.csv alone is what a run
    // killed before its first checkpoint leaves (nothing there to resume).
    if (name != "tensorboard" && name != "history.csv" && fs::exists(fs::symlink_status(fs::path(dir) / name, ec)))
      found.push_back(name);
  std::sort(found.begin(), found.end());
  return found;
}

namespace {

// A new run into a folder that holds an earlier run's outputs (or a user's
// files of those names) would replace them: only with output.overwrite.
// `within_the_run` (Workflow::start): this process holds the folder's lock,
// and its own scratch comparison (transfer.compare_with_scratch, trained
// first by run_training, which checked the folder before) may be there;
// else a run writing there now is named as its lock names it.
void refuse_earlier_outputs(const RunConfig& c, bool within_the_run) {
  if (c.out_dir.empty() || c.overwrite) return;
  std::vector<std::string> found = earlier_outputs(c.out_dir);
  if (within_the_run && c.compare_with_scratch) std::erase(found, std::string("scratch"));
  if (found.empty()) return;
  if (!within_the_run) io::OutputLock live(c.out_dir);  // waits for nobody
  std::string names;
  for (std::size_t i = 0; i < found.size() && i < 3; ++i) names += (i ? ", " : "") + found[i];
  if (found.size() > 3) names += " and " + std::to_string(found.size() - 3) + " more";
  throw UserError("output.dir (--out) " + c.out_dir + ": holds an earlier run's outputs (" + names +
                  "), which a new run would replace; continue it with --resume " + c.out_dir +
                  ", pass --overwrite (output.overwrite) to replace only those, or pick another --out");
}

}  // namespace

void check_new_run_folder(const RunConfig& config) { refuse_earlier_outputs(config, /*within_the_run=*/false); }

struct Workflow::State {
  RunConfig config;  // what checkpoints record: with the data's classes filled in
  RunConfig c;       // as it trains: scaled for replicas
  RunConfig pc;      // the current phase's
  RunEvents* events = nullptr;  // the primary's, else nobody()
  std::ostream* warnings = nullptr;  // every replica's
  Callbacks given;
  FaultInjection faults;
  std::unique_ptr<dist::Strategy> replicas;
  bool primary = true;
  std::optional<io::FolderGuard> folder;
  std::optional<io::OutputLock> lock;
  std::optional<ImageData> images;
  data::TrainTest data;
  const data::LabeledImages* test = nullptr;
  int64_t train_count = 0;
  std::optional<nn::Model> model;  // built from the config
  std::vector<Phase> phases;
  std::size_t phase = 0;
  std::unique_ptr<Executable> exe;
  History history;  // before the current phase's fit; then its result
  int64_t done = 0;
  EpochProgress progress;
  RunOutcome out;  // out.history: the last fit's result (fitted)
  bool fitted = false, ended = false;
};

Workflow::Workflow(const RunConfig& given, RunEvents* events, Callbacks callbacks, const FaultInjection& faults)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  validate(given);
  s.config = given;
  s.given = std::move(callbacks);
  s.faults = faults;
  s.replicas = dist::make_strategy(strategy_options(s.config));
  s.primary = s.replicas->is_primary();
  s.events = s.primary && events ? events : &nobody();
  s.warnings = events ? events->warnings() : nullptr;
  RunConfig& c = s.c;
  c = scaled_for_replicas(s.config, s.replicas->world_size() * static_cast<int>(s.config.replicas));
  require(c.checkpoint_every_steps == 0 || !c.out_dir.empty(),
          "training.checkpoint_every_steps (--checkpoint-every-steps) needs an output folder; pass --out DIR");
  // One run per output folder; one that fails before its first checkpoint
  // leaves the folder as it found it (removed, when it made it).
  if (!c.out_dir.empty() && s.primary) {
    s.folder.emplace(c.out_dir, std::vector<std::string>{kCheckpointFile}, run_outputs());
    io::ensure_writable_dir(c.out_dir);  // fail now, not after training
    s.lock.emplace(c.out_dir);
    io::remove_stale_temporaries(c.out_dir);  // left by a run killed inside a write
  }
  set_num_threads(c.threads > 0 ? c.threads : dist::default_threads_per_process());
  // A missing GPU fails now, not after loading the data.
  const DeviceChoice device = choose_device(c.device, s.replicas->gpu());
  require_replica_device(c, device);
  require_pretrained_file(c);
  test_pause(s.faults.load_pause_ms);
  if (s.config.data.reads_images()) {
    s.images = load_image_data(s.config, /*with_training=*/true);
    check_test_images(s.config);  // found now, not after training
    c.data.classes = s.config.data.classes = s.images->classes;
    if (!s.images->class_weights.empty()) s.events->class_weights(s.images->class_weights, s.images->classes);
    if (!s.images->skipped.empty()) s.events->skipped_examples(s.images->skipped);
  }
  const nn::Model& model = s.model.emplace(build_model(c, model_input_shape(c), model_classes(c)));
  if (device.kind == DeviceKind::cpu) require_memory_for_model(model, c);
  if (!s.images) s.data = data::load_fashion_mnist(c.data_dir);
  s.test = s.images ? &s.images->validation : &s.data.test;
  s.train_count = s.images ? s.images->train_examples : s.data.train.size();
  if (s.images) {
    check_model_meets_data(model, c, model_input_shape(c), static_cast<int64_t>(s.images->classes.size()));
  } else {  // IDX: the files' image size, and every label within the model's outputs
    int32_t top = 0;
    for (const data::LabeledImages* d : {&s.data.train, &s.data.test})
      for (int32_t y : d->labels.data<int32_t>()) top = std::max(top, y);
    const Shape& out = model.output_shape();
    check_model_meets_data(model, c, s.data.train.example_shape(), out.size() == 1 && out[0] > top ? out[0] : top + 1);
    require(s.data.test.example_shape() == s.data.train.example_shape(),
            c.data_dir + ": the test images are " + to_string(s.data.test.example_shape()) +
                " but the training images " + to_string(s.data.train.example_shape()) + "; use one data set's files");
  }
  s.phases = phases_of(c);
}

Workflow::~Workflow() = default;

void Workflow::start(const std::optional<RunCheckpoint>& resume) {
  State& s = *s_;
  nn::Model& model = *s.model;
  require(!s.exe, "Workflow::start: the run has started already");
  const RunConfig& c = s.c;
  // Here, where a new run is told from a resumed one; this process holds the folder's lock.
  if (!resume) refuse_earlier_outputs(c, /*within_the_run=*/true);
  // A resumed run continues in the phase its checkpoint was written in.
  s.phase = resume ? phase_at(s.phases, resume->epoch) : 0;
  s.pc = c;
  s.pc.lr = s.phases[s.phase].lr;
  set_phase_layers(model, c, s.phases[s.phase].frozen);
  std::string fallback;
  s.exe = compile_for(model, s.pc, s.replicas->gpu(), &fallback);
  if (!fallback.empty()) s.events->device_fallback(fallback);
  // A GPU runs steps_per_execution steps per call, and step callbacks (the
  // periodic checkpoint among them) see only the last of each.
  const int64_t together = std::min<int64_t>(c.steps_per_execution, s.exe->compiled_for().steps_per_call);
  require(together <= 1 || c.checkpoint_every_steps % together == 0,
          "training.checkpoint_every_steps (" + std::to_string(c.checkpoint_every_steps) +
              ") must be a multiple of steps_per_execution (" + std::to_string(together) + ") on " +
              s.exe->compiled_for().device + ", which runs that many steps at a time");
  if (resume) {
    s.exe->internals().write(Held::parameters, resume->params);
    s.exe->internals().write(Held::state, resume->state);
    s.exe->internals().write(Held::optimizer_state, resume->optimizer_state);
    s.history = resume->history;
    s.done = resume->epoch;
    s.progress = resume->progress;
    s.exe->set_learning_rate(resume->lr);
  } else if (!c.pretrained.empty()) {
    load_pretrained(*s.exe, model, c, *s.events);
  }
  dist::attach(*s.replicas, *s.exe, c.sync_batch_norm);
  s.out = {.history = {}, .device = s.exe->compiled_for().device, .threads = num_threads(),
           .replicas = s.replicas->world_size() * static_cast<int>(c.replicas), .primary = s.primary};
  s.events->run_begins({.config = c, .data_name = s.images ? c.data_dir : "Fashion-MNIST",
                        .validation = s.images.has_value(), .train_examples = s.train_count,
                        .held_out_examples = s.test->size(), .device = s.out.device, .threads = s.out.threads,
                        .resumed = resume.has_value(), .resumed_epochs = s.done, .resumed_steps = s.progress.step,
                        .process_replicas = s.replicas->world_size(), .strategy = s.replicas->name()});
  if (s.phases[0].frozen)
    s.events->transfer_planned(head_of(model, c), s.phases[0].last_epoch,
                               s.phases.size() > 1 ? s.phases[1].lr : 0.0);
}

bool Workflow::fit_phase() {
  State& s = *s_;
  nn::Model& model = *s.model;
  require(s.exe != nullptr, "Workflow::fit_phase: call start() first");
  require(!s.ended, "Workflow::fit_phase: the run has ended; call finish()");
  const RunConfig& c = s.c;
  FitOptions fit_options{.epochs = s.phases[s.phase].last_epoch, .seed = c.seed, .initial_epoch = s.done,
                         .run_epochs = c.epochs,
                         .initial_progress = s.progress, .on_nan = parse_on_nan(c.on_nan, "callbacks.on_nan"),
                         .steps_per_execution = c.steps_per_execution,
                         .callbacks = make_callbacks(s.pc, run_config_json(s.config), model, *s.events, s.given,
                                                     s.faults, s.primary),
                         .warnings = s.warnings, .strategy = s.replicas.get()};
  s.exe->internals().set_profiling(c.profile);
  {
    const StopSignals stop_signals;  // SIGINT/SIGTERM: finish the step, checkpoint, stop
    s.out.history = s.images ? fit(*s.exe, *s.images->training, fit_options, std::move(s.history))
                             : fit(*s.exe, s.data.train, s.data.test, fit_options, std::move(s.history));
  }
  // A signal after the last step (in the last epoch's evaluation or
  // checkpoint writes) stops the run too: its epoch-end checkpoint has the
  // position, and resuming writes the reports. Read once the scope has
  // closed (the flag stays), so a signal just before its end is not lost.
  const int signal = StopSignals::received();
  if (signal != 0 && !s.out.history.fault) s.out.history.interrupted = true;
  if (s.out.history.interrupted) s.out.stopped_by_signal = signal;
  s.fitted = true;
  const int64_t reached = s.out.history.epochs.empty() ? s.done : s.out.history.epochs.back().epoch;
  s.ended = s.out.history.interrupted || s.out.history.fault || s.phase + 1 == s.phases.size() ||
            reached < s.phases[s.phase].last_epoch;  // stopped, finished, or stopped early
  return !s.ended;
}

void Workflow::next_phase() {
  State& s = *s_;
  nn::Model& model = *s.model;
  require(s.exe != nullptr && !s.ended && s.phase + 1 < s.phases.size() && s.out.history.epochs.size() > 0,
          "Workflow::next_phase: call it after fit_phase() returned true");
  const RunConfig& c = s.c;
  std::vector<float> params(model.num_parameters()), state(model.num_state());
  s.exe->internals().read(Held::parameters, params);
  s.exe->internals().read(Held::state, state);
  s.pc = c;
  s.pc.lr = s.phases[++s.phase].lr;
  set_phase_layers(model, c, s.phases[s.phase].frozen);
  s.exe = compile_for(model, s.pc, s.replicas->gpu());
  s.exe->internals().write(Held::parameters, params);
  s.exe->internals().write(Held::state, state);
  dist::attach(*s.replicas, *s.exe, c.sync_batch_norm);
  s.done = s.out.history.epochs.back().epoch;
  s.progress = {};
  s.history = std::move(s.out.history);
  s.out.history = {};
  s.fitted = false;
  s.events->phase_begins(s.done + 1, !(c.pretrained.empty() || c.fine_tune_batch_norm));
}

RunOutcome Workflow::finish(const std::optional<History>& scratch) {
  State& s = *s_;
  nn::Model& model = *s.model;
  require(s.ended, "Workflow::finish: train every phase first (fit_phase() until it returns false)");
  const RunConfig& c = s.c;
  RunOutcome& out = s.out;
  if (out.history.interrupted) return out;  // the checkpoint has the position; no reports for an unfinished run
  Executable& exe = *s.exe;
  if (out.history.fault) stop_for_fault(*out.history.fault, c, model, exe, s.folder ? &*s.folder : nullptr);
  if (c.profile)
    s.events->profiled(profile_table(exe.internals().profile(), exe.internals().profiled_steps()) +
                       communication_report(*s.replicas));
  const auto& h = out.history;
  if (h.epochs.empty() || !s.primary) return out;
  // The kept weights on the validation (or test) split: the console's final block, summary.json, the report.
  const data::LabeledImages& test = *s.test;
  const EvaluationReport ev = evaluate_report(exe, test, loss_kind(c));
  const DataLook look = look_of(c);
  const std::vector<std::string>& classes = look.classes;
  s.events->finished(h, ev, classes, s.images ? "validation" : "test");
  if (c.out_dir.empty()) return out;
  test_pause(s.faults.report_pause_ms);
  const fs::path dir(c.out_dir);
  report::RunInfo info{.model = c.model, .dataset = c.data_dir, .device = out.device,
                       .cpu_kernels = out.device == "cpu" ? kernel_set_name(best_kernel_set()) : "",
                       .conv_algo = out.device == "cpu" ? c.conv_algo : "",
                       .batch_slices = out.device == "cpu" ? exe.internals().batch_slices() : 0,
                       .precision = c.precision,
                       .threads = out.threads,
                       .epochs = c.epochs, .batch_size = c.batch_size, .lr = c.lr, .momentum = c.momentum,
                       .seed = c.seed, .replicas = s.replicas->world_size() * static_cast<int>(c.replicas)};
  bool wrote_submission = false;
  if (s.images) {
    std::vector<std::string> skipped = s.images->skipped;
    nlohmann::json d = {{"kind", c.data.kind}, {"classes", c.data.classes},
                        {"train_examples", s.images->train_examples}, {"validation_examples", test.size()}};
    if (!c.data.test_csv.empty()) {
      const std::string path = (dir / "submission.csv").string();
      d["test_examples"] = write_submission(exe, c, data_path(c, c.data.test_csv, "data.test_csv"), path, &skipped);
      wrote_submission = true;
      if (skipped.size() > s.images->skipped.size())
        s.events->submission_skipped({skipped.begin() + static_cast<std::ptrdiff_t>(s.images->skipped.size()),
                                      skipped.end()});
    }
    d["skipped_examples"] = skipped.size();
    d["skipped"] = skipped;
    // File names from another system may not be UTF-8 (the skipped list names them): replaced, not fatal.
    info.data_json = d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::vector<float> params(model.num_parameters()), state(model.num_state());
  exe.internals().read(Held::parameters, params);
  exe.internals().read(Held::state, state);
  io::write_safetensors((dir / "model.safetensors").string(), io::to_named(model, params, state));
  std::vector<std::string> files =
      report::write_run_report(c.out_dir, {.info = info, .history = h, .evaluation = ev, .examples = &test,
                                           .classes = classes, .mean = look.mean, .std = look.std,
                                           .title = "convoy: " + c.model + " on " + look.name,
                                           .config_json = run_config_json(c),
                                           .compared = compared_runs(c, h, scratch)});
  // Listed after summary.json: the files written while the run trained.
  files.insert(files.begin() + 1, {"history.csv", "model.safetensors", kCheckpointFile});
  if (wrote_submission) files.push_back("submission.csv");
  s.events->wrote(c.out_dir, files);
  return out;
}

RunOutcome Workflow::run(const std::optional<RunCheckpoint>& resume, const std::optional<History>& scratch) {
  start(resume);
  while (fit_phase()) next_phase();
  return finish(scratch);
}

const RunConfig& Workflow::config() const { return s_->config; }
const nn::Model& Workflow::model() const { return *s_->model; }
Executable& Workflow::executable() {
  require(s_->exe != nullptr, "Workflow::executable: call start() first");
  return *s_->exe;
}
const History& Workflow::history() const { return s_->fitted ? s_->out.history : s_->history; }
std::size_t Workflow::phase() const { return s_->phase; }
std::size_t Workflow::phase_count() const { return s_->phases.size(); }

}  // namespace convoy::train
