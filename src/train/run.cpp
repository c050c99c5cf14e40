#include "convoy/train/run.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/data/idx.h"
#include "convoy/dist/data_parallel.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/model_weights.h"
#include "convoy/io/output_folder.h"
#include "convoy/report/plots.h"
#include "convoy/io/pretrained.h"
#include "convoy/report/run_summary.h"
#include "convoy/nn/zoo.h"
#include "convoy/train/checkpoint.h"
#include "convoy/train/evaluation.h"
#include "convoy/train/fit.h"
#include "convoy/train/graceful_stop.h"
#include "convoy/train/image_data.h"
#include "convoy/train/profile_report.h"
#include "convoy/train/replicas.h"
#include "convoy/train/schedules.h"
#include "fault_injection.h"
#include "train/class_weights.h"
#include "train/preflight.h"
#include "train/restore.h"
#include "transfer.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

using data::kFashionMnistClasses;

// The pictures and the report of a finished run.
// The class names and pixel normalisation of a run's data, for the pictures.
struct DataLook {
  std::string name;  // "Fashion-MNIST" or the data folder
  std::vector<std::string> classes;
  std::vector<float> mean, std;  // per channel
};

DataLook look_of(const RunConfig& c) {
  if (!c.data.reads_images()) return {"Fashion-MNIST", kFashionMnistClasses, {data::kSeedMean}, {data::kSeedStd}};
  DataLook look{c.data_dir, c.data.classes, {}, {}};
  for (int64_t k = 0; k < c.data.channels; ++k) {
    const auto pick = [&](const std::vector<double>& v) { return static_cast<float>(v.size() == 1 ? v[0] : v[k]); };
    look.mean.push_back(pick(c.data.mean));
    look.std.push_back(pick(c.data.std));
  }
  return look;
}

// The runs a report compares: this one and, for transfer learning with
// compare_with_scratch, the same model trained from random weights.
std::vector<report::NamedHistory> compared_runs(const RunConfig& c, const History& h, const std::optional<History>& scratch) {
  if (!scratch || scratch->epochs.empty() || h.epochs.empty()) return {};
  return {{c.pretrained.empty() ? "this run" : "pretrained", h}, {"from scratch", *scratch}};
}

std::string compared_json(const std::vector<report::NamedHistory>& runs) {
  if (runs.empty()) return "";
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : runs) {
    const auto& e = r.history.epochs;
    const auto best = std::max_element(e.begin(), e.end(), [](const auto& x, const auto& y) {
      return x.test_accuracy < y.test_accuracy;
    });
    a.push_back({{"run", r.name}, {"epochs", e.size()}, {"best_val_accuracy", best->test_accuracy},
                 {"best_epoch", best->epoch}, {"final_val_accuracy", e.back().test_accuracy},
                 {"final_val_loss", e.back().test_loss}});
  }
  return a.dump();
}

void write_reports(const fs::path& dir, const RunConfig& c, const RunOutcome& out, const EvaluationReport& ev,
                   const data::LabeledImages& test, const std::vector<report::NamedHistory>& compared) {
  const History& h = out.history;
  const DataLook look = look_of(c);
  report::write_curves_png((dir / "curves.png").string(), h);
  std::vector<std::string> images = {"curves.png"};
  if (!compared.empty()) {
    report::write_comparison_png((dir / "comparison.png").string(), compared);
    images.push_back("comparison.png");
  }
  images.insert(images.end(), {"predictions.png", "confusion.png"});
  const std::vector<int32_t>& predicted = ev.predicted;
  const auto labels = test.labels.data<int32_t>();
  report::write_confusion_png((dir / "confusion.png").string(), ev.confusion, look.classes);
  report::write_predictions_png((dir / "predictions.png").string(),
                            {.images = test.images.data<float>().data(), .count = test.size(),
                             .height = test.images.dim(2), .width = test.images.dim(3), .labels = labels.data(),
                             .predicted = predicted.data(), .mean = look.mean[0], .std = look.std[0],
                             .class_names = look.classes, .channels = test.images.dim(1),
                             .channel_mean = look.mean, .channel_std = look.std});
  report::write_report_html((dir / "report.html").string(),
                        {.title = "convoy: " + c.model + " on " + look.name, .device = out.device,
                         .config_json = run_config_json(c), .class_scores = class_scores(ev, look.classes),
                         .mean_roc_auc = ev.mean_roc_auc, .threads = out.threads, .images = images,
                         .compared = compared},
                        h);
}

// Whether "auto" settling on the CPU is news: only when this machine has a
// GPU the user may expect it to use (found but unusable, or lacking a
// layer's kernels), and once per process (a transfer run compiles each phase,
// a scratch comparison a second model). Without any GPU it says nothing, as
// PyTorch does (TensorFlow logs once): the run's header names the device and
// `convoy devices` says why no GPU (docs/cuda.md). A device the user named
// (pjrt, tpu, pjrt-gpu) that is missing is always news, once.
bool say_fallback(const DeviceChoice& device, const std::string& requested) {
  static std::atomic<bool> said{false};
  return !device.fallback.empty() && (requested != "auto" || !find_gpus().gpus.empty()) && !said.exchange(true);
}

// Replicas live inside a PJRT program: the CPU that a missing plugin falls back to has none.
void require_replica_device(const RunConfig& c, const DeviceChoice& device) {
  if (c.replicas > 1 && device.kind != DeviceKind::pjrt) {
    std::string why = device.fallback;
    if (const auto cut = why.rfind("; training on the CPU"); cut != std::string::npos) why.resize(cut);
    throw UserError("training.replicas (--replicas) " + std::to_string(c.replicas) + " needs a PJRT device: " + why +
                    "; make the plugin available, or train without --replicas");
  }
}

// On the configured device (a GPU: `gpu`, the strategy's); `log` (when given)
// gets the one line that says why "auto" falls back to the CPU, when say_fallback.
std::unique_ptr<Executable> compile_for(const nn::Model& model, const RunConfig& c, int gpu,
                                        std::ostream* log = nullptr) {
  CompileOptions options;
  options.batch_size = c.batch_size * c.replicas;  // the global batch; a PJRT program splits it over its replicas
  options.pjrt = {.replicas = static_cast<int>(c.replicas), .sync_batch_norm = c.sync_batch_norm};
  options.loss = loss_kind(c);
  options.label_smoothing = static_cast<float>(c.label_smoothing);
  options.optimizer = optimizer_options(c);
  options.steps_per_execution = c.steps_per_execution;
  options.conv_algo = parse_conv_algo(c.conv_algo);
  options.parallelism = parse_parallelism(c.parallelism);
  options.precision = parse_precision(c.precision);
  const DeviceChoice device = choose_device(c.device, model, gpu);
  require_replica_device(c, device);
  if (log && say_fallback(device, c.device)) *log << "convoy: " << device.fallback << "\n" << std::flush;
  return compile_on(device, model, options, c.seed);
}

// `saved` is the config checkpoints record (before scaling for replicas).
// Replicas other than the primary get only the callbacks that steer training
// (fit makes them agree on stopping); printing and files are the primary's.
Callbacks make_callbacks(const RunConfig& c, const RunConfig& saved, const nn::Model& model, std::ostream& log,
                         bool primary) {
  Callbacks cbs;
  const FaultInjection faults = FaultInjection::from_environment();
  if (auto pacer = step_pacer(faults.step_delay_ms)) cbs.push_back(pacer);
  cbs.push_back(std::make_shared<StopOnSignal>());  // before the checkpoint saver: it sees the interruption
  if (c.progress != "quiet" && primary) {
    const bool bar = c.progress == "bar" || (c.progress == "auto" && ::isatty(STDOUT_FILENO));
    cbs.push_back(std::make_shared<ProgressLogger>(log, bar));
  }
  if (c.terminate_on_nan && primary) cbs.push_back(std::make_shared<TerminateOnNaN>());
  if (c.early_stopping)
    cbs.push_back(std::make_shared<EarlyStopping>(*c.early_stopping, c.progress != "quiet" && primary ? &log : nullptr));
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

// What a run writes into its output folder (a failed run's FolderGuard removes
// only these).
std::vector<std::string> run_outputs() {
  return {kCheckpointFile, kPreviousCheckpointFile, "best.safetensors", "model.safetensors", "history.csv",
          "tensorboard",   "summary.json",          "curves.png",       "predictions.png",   "confusion.png",
          "comparison.png", "report.html",          "submission.csv",   "scratch"};
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
void load_pretrained(Executable& exe, const nn::Model& model, const RunConfig& c, std::ostream& log) {
  io::FlatWeights w{std::vector<float>(model.num_parameters()), std::vector<float>(model.num_state())};
  exe.internals().read(Held::parameters, w.params);
  exe.internals().read(Held::state, w.state);
  const std::string head = head_of(model, c);
  const int loaded = io::load_pytorch_weights(model, c.pretrained, w, {.skip_prefixes = {head + "."}});
  exe.internals().write(Held::parameters, w.params);
  exe.internals().write(Held::state, w.state);
  if (c.progress != "quiet")
    log << "convoy: " << loaded << " pretrained tensors from " << c.pretrained << "; new head '" << head << "'\n";
}

// %g without a float's noise: 0.5, 0.05 (not 0.05000000074505806).
std::string format_number(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", v);
  return s;
}

// The shared body of a fresh and a resumed run. Every replica runs it; only
// the primary prints and writes.
// `scratch`: the history of the same model trained from random weights, for
// the report's comparison (transfer.compare_with_scratch).
RunOutcome run(const RunConfig& given, const std::optional<Checkpoint>& resume, std::ostream& primary_log,
               const std::optional<History>& scratch = std::nullopt) {
  validate(given);
  RunConfig config = given;  // what checkpoints record: with the data's classes filled in
  const std::unique_ptr<dist::Strategy> replicas = dist::make_strategy(strategy_options(config));
  const bool primary = replicas->is_primary();
  std::ostream discard(nullptr);
  std::ostream& log = primary ? primary_log : discard;
  RunConfig c = scaled_for_replicas(config, replicas->world_size() * static_cast<int>(config.replicas));
  require(c.checkpoint_every_steps == 0 || !c.out_dir.empty(),
          "training.checkpoint_every_steps (--checkpoint-every-steps) needs an output folder; pass --out DIR");
  // One run per output folder; one that fails before its first checkpoint
  // leaves the folder as it found it (removed, when it made it).
  std::optional<io::FolderGuard> folder;
  std::optional<io::OutputLock> lock;
  if (!c.out_dir.empty() && primary) {
    folder.emplace(c.out_dir, std::vector<std::string>{kCheckpointFile}, run_outputs());
    io::ensure_writable_dir(c.out_dir);  // fail now, not after training
    lock.emplace(c.out_dir);
    io::remove_stale_temporaries(c.out_dir);  // left by a run killed inside a write
  }
  set_num_threads(c.threads > 0 ? c.threads : dist::default_threads_per_process());
  // A missing GPU fails now, not after loading the data.
  require_replica_device(c, choose_device(c.device, replicas->gpu()));
  require(c.pretrained.empty() || fs::is_regular_file(c.pretrained),
          "model.pretrained: " + c.pretrained +
              " is missing; for the EfficientNet-Lite0 weights run bash tools/fetch_pretrained.sh, else fix the path");
  std::optional<ImageData> images;
  if (config.data.reads_images()) {
    images = load_image_data(config, /*with_training=*/true);
    check_test_images(config);  // found now, not after training
    c.data.classes = config.data.classes = images->classes;
    if (!images->class_weights.empty() && c.progress != "quiet")
      log << "class weights in the loss: " << describe_weights(images->class_weights, images->classes) << "\n";
    if (!images->skipped.empty()) {  // one line per example: which file or row, and why
      log << "skipped " << images->skipped.size() << " bad example(s) (on_bad_example: skip):";
      for (const auto& s : images->skipped) log << "\n  " << s;
      log << std::endl;
    }
  }
  nn::Model model = build_model(c, model_input_shape(c), model_classes(c));
  const data::TrainTest data = images ? data::TrainTest{} : data::load_fashion_mnist(c.data_dir);
  const data::LabeledImages& test = images ? images->validation : data.test;
  const int64_t train_count = images ? images->train_examples : data.train.size();
  if (images) {
    check_model_meets_data(model, c, model_input_shape(c), static_cast<int64_t>(images->classes.size()));
  } else {  // IDX: the files' image size, and every label within the model's outputs
    int32_t top = 0;
    for (const data::LabeledImages* d : {&data.train, &data.test})
      for (int32_t y : d->labels.data<int32_t>()) top = std::max(top, y);
    const Shape& out = model.output_shape();
    check_model_meets_data(model, c, data.train.example_shape(), out.size() == 1 && out[0] > top ? out[0] : top + 1);
    require(data.test.example_shape() == data.train.example_shape(),
            c.data_dir + ": the test images are " + to_string(data.test.example_shape()) + " but the training images " +
                to_string(data.train.example_shape()) + "; use one data set's files");
  }
  // A resumed run continues in the phase its checkpoint was written in.
  const std::vector<Phase> phases = phases_of(c);
  std::size_t phase = resume ? phase_at(phases, resume->epoch) : 0;
  const auto phase_config = [&](const Phase& p) {
    RunConfig pc = c;
    pc.lr = p.lr;
    return pc;
  };
  RunConfig pc = phase_config(phases[phase]);
  set_phase_layers(model, c, phases[phase].frozen);
  auto exe = compile_for(model, pc, replicas->gpu(), c.progress == "quiet" ? nullptr : &log);
  // A GPU runs steps_per_execution steps per call, and step callbacks (the
  // periodic checkpoint among them) see only the last of each.
  const int64_t together = std::min<int64_t>(c.steps_per_execution, exe->steps_per_call());
  require(together <= 1 || c.checkpoint_every_steps % together == 0,
          "training.checkpoint_every_steps (" + std::to_string(c.checkpoint_every_steps) +
              ") must be a multiple of steps_per_execution (" + std::to_string(together) + ") on " + exe->device() +
              ", which runs that many steps at a time");
  History history;
  int64_t done = 0;
  EpochProgress progress;
  if (resume) {
    exe->internals().write(Held::parameters, resume->params);
    exe->internals().write(Held::state, resume->state);
    exe->internals().write(Held::optimizer_state, resume->optimizer_state);
    history = resume->history;
    done = resume->epoch;
    progress = resume->progress;
    exe->set_learning_rate(resume->lr);
  } else if (!c.pretrained.empty()) {
    load_pretrained(*exe, model, c, log);
  }
  std::string resuming;
  if (resume) resuming = ", resuming after epoch " + std::to_string(done);
  if (progress.step > 0) resuming += " and " + std::to_string(progress.step) + " steps of epoch " + std::to_string(done + 1);
  dist::attach(*replicas, *exe, c.sync_batch_norm);
  RunOutcome out{.history = {}, .device = exe->device(), .threads = num_threads(),
                 .replicas = replicas->world_size() * static_cast<int>(c.replicas), .primary = primary};
  if (c.progress != "quiet") {
    // Momentum only where the optimizer has one (SGD, RMSprop).
    const std::string momentum =
        c.optimizer == "sgd" || c.optimizer == "rmsprop" ? " momentum " + format_number(c.momentum) : "";
    char line[320];
    std::snprintf(line, sizeof line,
                  "convoy: %s on %s (%lld train, %lld %s) | %s, %d thread%s | batch %lld, %s lr %g%s, "
                  "%lld epoch%s, seed %llu%s\n",
                  c.model.c_str(), images ? c.data_dir.c_str() : "Fashion-MNIST", static_cast<long long>(train_count),
                  static_cast<long long>(test.size()), images ? "validation" : "test",
                  out.device.c_str(), out.threads, out.threads == 1 ? "" : "s", static_cast<long long>(c.batch_size),
                  c.optimizer == "sgd" ? "SGD" : c.optimizer.c_str(), c.lr, momentum.c_str(),
                  static_cast<long long>(c.epochs), c.epochs == 1 ? "" : "s", static_cast<unsigned long long>(c.seed),
                  resuming.c_str());
    log << line;
    if (replicas->world_size() > 1)
      log << "  " << replicas->world_size() << " replicas (" << replicas->name() << "): global batch "
          << c.batch_size * replicas->world_size() << (c.scale_lr ? ", lr scaled by replicas" : "")
          << (c.sync_batch_norm ? ", synchronised batch norm" : ", batch norm per replica") << "\n";
    if (c.replicas > 1)
      log << "  " << c.replicas << " replicas in one program (" << out.device << "): global batch "
          << c.batch_size * c.replicas << (c.scale_lr ? ", lr scaled by replicas" : "")
          << (c.sync_batch_norm ? ", synchronised batch norm" : ", batch norm per replica") << "\n";
    log << std::flush;
  }
  if (phases[0].frozen && c.progress != "quiet") {
    log << "  transfer: epochs 1-" << phases[0].last_epoch << " train the head '" << head_of(model, c)
        << "' alone (the rest frozen, batch norm on running statistics)";
    if (phases.size() > 1) log << ", then every layer trains at lr " << phases[1].lr;
    log << "\n" << std::flush;
  }
  while (true) {
    FitOptions fit_options{.epochs = phases[phase].last_epoch, .seed = c.seed, .initial_epoch = done,
                           .run_epochs = c.epochs,
                           .initial_progress = progress, .on_nan = parse_on_nan(c.on_nan, "callbacks.on_nan"),
                           .steps_per_execution = c.steps_per_execution,
                           .callbacks = make_callbacks(pc, config, model, log, primary), .strategy = replicas.get()};
    exe->internals().set_profiling(c.profile);
    {
      const StopSignals stop_signals;  // SIGINT/SIGTERM: finish the step, checkpoint, stop
      out.history = images ? fit(*exe, *images->training, fit_options, std::move(history))
                           : fit(*exe, data.train, data.test, fit_options, std::move(history));
      if (out.history.interrupted) out.stopped_by_signal = StopSignals::received();
    }
    if (out.stopped_by_signal || out.history.fault) break;
    const int64_t reached = out.history.epochs.empty() ? done : out.history.epochs.back().epoch;
    if (phase + 1 == phases.size() || reached < phases[phase].last_epoch) break;  // finished, or stopped early
    // The next phase: every layer trains, from the weights so far, with a
    // fresh optimizer state (as Keras's compile before fine-tuning).
    std::vector<float> params(model.num_parameters()), state(model.num_state());
    exe->internals().read(Held::parameters, params);
    exe->internals().read(Held::state, state);
    pc = phase_config(phases[++phase]);
    set_phase_layers(model, c, phases[phase].frozen);
    exe = compile_for(model, pc, replicas->gpu());
    exe->internals().write(Held::parameters, params);
    exe->internals().write(Held::state, state);
    dist::attach(*replicas, *exe, c.sync_batch_norm);
    done = reached;
    progress = {};
    history = std::move(out.history);
    if (c.progress != "quiet")
      log << "  transfer: from epoch " << done + 1 << " every layer trains"
          << (c.pretrained.empty() || c.fine_tune_batch_norm ? "" : " (batch norms stay on running statistics)") << "\n"
          << std::flush;
  }
  if (out.stopped_by_signal) return out;  // the checkpoint has the position; no reports for an unfinished run
  if (out.history.fault) stop_for_fault(*out.history.fault, c, model, *exe, folder ? &*folder : nullptr);
  if (c.profile)
    log << profile_table(exe->internals().profile(), exe->internals().profiled_steps())
        << communication_report(*replicas) << std::flush;
  const auto& h = out.history;
  if (h.epochs.empty() || !primary) return out;
  // The kept weights on the validation (or test) split: the console's final block, summary.json, the report.
  const EvaluationReport ev = evaluate_report(*exe, test, loss_kind(c));
  if (c.progress != "quiet") {
    char line[200];
    const EpochRecord& kept = h.kept();
    char from[48] = "";
    if (kept.epoch != h.epochs.back().epoch)
      std::snprintf(from, sizeof from, " (weights of epoch %lld)", static_cast<long long>(kept.epoch));
    std::snprintf(line, sizeof line, "total training time %.2f s | test accuracy %.2f%%%s | %.0f images/s\n",
                  h.total_train_seconds, 100.0 * kept.test_accuracy, from, h.images_per_second());
    log << line << evaluation_text(ev, look_of(c).classes, images ? "validation" : "test") << std::flush;
  }
  if (!c.out_dir.empty()) {
    const fs::path dir(c.out_dir);
    report::RunInfo info{.model = c.model, .dataset = c.data_dir, .device = out.device,
                     .cpu_kernels = out.device == "cpu" ? kernel_set_name(best_kernel_set()) : "",
                     .conv_algo = out.device == "cpu" ? c.conv_algo : "",
                     .batch_slices = out.device == "cpu" ? exe->internals().batch_slices() : 0,
                     .precision = c.precision,
                     .threads = out.threads,
                     .epochs = c.epochs, .batch_size = c.batch_size, .lr = c.lr, .momentum = c.momentum,
                     .seed = c.seed, .replicas = replicas->world_size() * static_cast<int>(c.replicas)};
    info.evaluation_json = evaluation_json(ev, look_of(c).classes);
    const std::vector<report::NamedHistory> compared = compared_runs(c, h, scratch);
    info.compared_json = compared_json(compared);
    std::string wrote_submission;
    if (images) {
      std::vector<std::string> skipped = images->skipped;
      nlohmann::json d = {{"kind", c.data.kind}, {"classes", c.data.classes},
                          {"train_examples", images->train_examples}, {"validation_examples", test.size()}};
      if (!c.data.test_csv.empty()) {
        const std::string path = (dir / "submission.csv").string();
        d["test_examples"] = write_submission(*exe, c, data_path(c, c.data.test_csv), path, &skipped);
        wrote_submission = ",submission.csv";
        if (skipped.size() > images->skipped.size() && c.progress != "quiet")
          for (std::size_t i = images->skipped.size(); i < skipped.size(); ++i) log << "skipped " << skipped[i] << "\n";
      }
      d["skipped_examples"] = skipped.size();
      d["skipped"] = skipped;
      info.data_json = d.dump();
    }
    std::vector<float> params(model.num_parameters()), state(model.num_state());
    exe->internals().read(Held::parameters, params);
    exe->internals().read(Held::state, state);
    io::write_safetensors((dir / "model.safetensors").string(), io::to_named(model, params, state));
    io::write_file_atomic((dir / "summary.json").string(), report::run_summary_json(info, h));
    write_reports(dir, c, out, ev, test, compared);
    if (c.progress != "quiet")
      log << "wrote " << c.out_dir << "/{summary.json,history.csv,model.safetensors," << kCheckpointFile
          << ",curves.png," << (compared.empty() ? "" : "comparison.png,") << "predictions.png,confusion.png,report.html"
          << wrote_submission << "}" << std::endl;
  }
  return out;
}

// transfer.compare_with_scratch: the same model, data, epochs and rate from
// random weights with every layer training, in OUT/scratch (a run of its own,
// first). A resumed comparison reuses it when it finished and resumes it when
// it had started; a stop inside it leaves only its checkpoint, so the
// comparison then starts again from the beginning.
RunOutcome run_scratch(const RunConfig& c, std::ostream& log, bool resuming) {
  RunConfig s = c;
  s.pretrained.clear();
  s.freeze_epochs = 0;
  s.fine_tune_lr = 0;
  s.compare_with_scratch = false;
  if (!c.out_dir.empty()) s.out_dir = (fs::path(c.out_dir) / "scratch").string();
  const bool reusable = resuming && !s.out_dir.empty();
  if (reusable && fs::exists(fs::path(s.out_dir) / "summary.json")) {
    RunOutcome done;
    done.history = load_latest_checkpoint(s.out_dir, std::cerr).history;
    return done;
  }
  if (c.progress != "quiet")
    log << "convoy: first, for comparison, " << c.model << " from random weights (every layer, lr " << c.lr << ", "
        << c.epochs << " epochs)" << (s.out_dir.empty() ? "" : " -> " + s.out_dir) << "\n" << std::flush;
  RunOutcome o = reusable && fs::exists(fs::path(s.out_dir) / kCheckpointFile)
                     ? run(s, load_latest_checkpoint(s.out_dir, std::cerr), log)
                     : run(s, std::nullopt, log);
  if (!o.stopped_by_signal && c.progress != "quiet")
    log << "convoy: now " << c.model << " from " << c.pretrained << "\n" << std::flush;
  return o;
}

RunOutcome run_compared(const RunConfig& c, const std::optional<Checkpoint>& resume, std::ostream& log) {
  check_before_training(c);  // before the scratch comparison trains
  if (!c.compare_with_scratch) return run(c, resume, log);
  RunOutcome scratch = run_scratch(c, log, resume.has_value());
  if (scratch.stopped_by_signal) return scratch;
  return run(c, resume, log, std::move(scratch.history));
}

}  // namespace

RunOutcome run_training(const RunConfig& config, std::ostream& log) { return run_compared(config, std::nullopt, log); }

RunOutcome resume_training(const std::string& dir, std::ostream& log, const std::function<void(RunConfig&)>& adjust,
                           int64_t epochs) {
  Checkpoint ck = load_latest_checkpoint(dir, std::cerr);
  ck.config.out_dir = dir;
  if (adjust) adjust(ck.config);
  const bool unfinished_epoch = ck.progress.step > 0;
  // A run whose training ended but whose reports were never all written (a
  // full disk at the end) is not finished: resuming writes them.
  const bool reported = fs::exists(fs::path(dir) / "summary.json");
  if (ck.history.stopped_epoch > 0 && reported) {  // early stopping ended it: its patience is spent
    log << "convoy: " << dir << " is finished: early stopping ended it after epoch " << ck.history.stopped_epoch
        << " (its weights are epoch " << ck.history.kept().epoch << "'s); nothing to resume" << std::endl;
    return {};
  }
  if (epochs > 0) {
    require(epochs >= ck.epoch + (unfinished_epoch ? 1 : 0),
            "--epochs " + std::to_string(epochs) + ": " + dir + " has already trained " + std::to_string(ck.epoch) +
                " epochs; give more to continue it");
    if (epochs != ck.config.epochs && (ck.config.schedule.kind == "cosine" || ck.config.schedule.kind == "one_cycle"))
      log << "convoy: note: the " << ck.config.schedule.kind << " schedule spans the run's epochs, so with --epochs "
          << epochs << " the learning rates from epoch " << ck.epoch + 1
          << " on differ from the first run's plan (and from a run that asked for " << epochs << " at the start)"
          << std::endl;
    ck.config.epochs = epochs;
  }
  if (ck.epoch >= ck.config.epochs && !unfinished_epoch && reported) {
    log << "convoy: " << dir << " is finished: it trained all " << ck.config.epochs
        << " epochs; nothing to resume (add --epochs N to train on to epoch N)" << std::endl;
    return {};
  }
  return run_compared(ck.config, ck, log);
}

// A checkpoint's model compiled with its weights, ready for inference.
std::unique_ptr<Executable> restore(const Checkpoint& ck) {
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
  const Checkpoint ck = load_latest_checkpoint(dir, std::cerr);
  if (ck.config.data.reads_images())  // the run's validation split, rebuilt from its seed
    return evaluate(*restore(ck), load_image_data(ck.config, /*with_training=*/false).validation);
  const data::TrainTest data = data::load_fashion_mnist(ck.config.data_dir);
  return evaluate(*restore(ck), data.test);
}

}  // namespace convoy::train
