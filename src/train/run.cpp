#include "convoy/train/run.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "convoy/backends/devices.h"
#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/data/idx.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/model_weights.h"
#include "convoy/io/plots.h"
#include "convoy/io/run_summary.h"
#include "convoy/nn/zoo.h"
#include "convoy/train/checkpoint.h"
#include "convoy/train/evaluation.h"
#include "convoy/train/fit.h"
#include "convoy/train/profile_report.h"
#include "convoy/train/schedules.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kFashionMnistClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                       "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// The pictures and the report of a finished run.
void write_reports(const fs::path& dir, const RunConfig& c, const RunOutcome& out, const EvaluationReport& ev,
                   const data::LabeledImages& test) {
  const History& h = out.history;
  io::write_curves_png((dir / "curves.png").string(), h);
  const std::vector<int32_t>& predicted = ev.predicted;
  const auto labels = test.labels.data<int32_t>();
  io::write_confusion_png((dir / "confusion.png").string(), ev.confusion, kFashionMnistClasses);
  io::write_predictions_png((dir / "predictions.png").string(),
                            {.images = test.images.data<float>().data(), .count = test.size(),
                             .height = test.images.dim(2), .width = test.images.dim(3), .labels = labels.data(),
                             .predicted = predicted.data(), .mean = data::kSeedMean, .std = data::kSeedStd,
                             .class_names = kFashionMnistClasses});
  io::write_report_html((dir / "report.html").string(),
                        {.title = "convoy: " + c.model + " on Fashion-MNIST", .device = out.device,
                         .config_json = run_config_json(c), .threads = out.threads,
                         .images = {"curves.png", "predictions.png", "confusion.png"}},
                        h);
}

// On the configured device; `log` (when given) gets the one line that says
// why "auto" falls back to the CPU.
std::unique_ptr<Executable> compile_for(const nn::Model& model, const RunConfig& c, std::ostream* log = nullptr) {
  CompileOptions options;
  options.batch_size = c.batch_size;
  options.loss = loss_kind(c);
  options.label_smoothing = static_cast<float>(c.label_smoothing);
  options.optimizer = optimizer_options(c);
  options.steps_per_execution = c.steps_per_execution;
  const DeviceChoice device = choose_device(c.device);
  if (log && !device.fallback.empty()) *log << "convoy: " << device.fallback << "\n" << std::flush;
  return compile_on(device.kind, model, options, c.seed);
}

Callbacks make_callbacks(const RunConfig& c, const nn::Model& model, std::ostream& log) {
  Callbacks cbs;
  if (c.progress != "quiet") {
    const bool bar = c.progress == "bar" || (c.progress == "auto" && ::isatty(STDOUT_FILENO));
    cbs.push_back(std::make_shared<ProgressLogger>(log, bar));
  }
  if (c.terminate_on_nan) cbs.push_back(std::make_shared<TerminateOnNaN>());
  if (c.early_stopping) cbs.push_back(std::make_shared<EarlyStopping>(*c.early_stopping));
  if (c.schedule.active()) cbs.push_back(std::make_shared<LearningRateScheduler>(c.schedule, c.lr));
  if (c.reduce_lr_on_plateau) cbs.push_back(std::make_shared<ReduceLrOnPlateau>(*c.reduce_lr_on_plateau));
  if (!c.out_dir.empty()) {
    cbs.push_back(std::make_shared<CsvLogger>((fs::path(c.out_dir) / "history.csv").string()));
    cbs.push_back(std::make_shared<TensorBoardLogger>((fs::path(c.out_dir) / "tensorboard").string()));
    cbs.push_back(std::make_shared<CheckpointSaver>((fs::path(c.out_dir) / kCheckpointFile).string(), model, c));
    // The best epoch's weights by validation loss, beside the latest.
    cbs.push_back(std::make_shared<CheckpointSaver>((fs::path(c.out_dir) / "best.safetensors").string(), model, c,
                                                    /*save_best_only=*/true, "val_loss"));
  }
  return cbs;
}

// The shared body of a fresh and a resumed run.
RunOutcome run(const RunConfig& c, const std::optional<Checkpoint>& resume, std::ostream& log) {
  validate(c);
  if (!c.out_dir.empty()) io::ensure_writable_dir(c.out_dir);  // fail now, not after training
  set_num_threads(c.threads);
  choose_device(c.device);  // a missing GPU fails now, not after loading the data
  const nn::Model model = build_model(c, data::kFashionMnistShape);
  const data::TrainTest data = data::load_fashion_mnist(c.data_dir);
  auto exe = compile_for(model, c, c.progress == "quiet" ? nullptr : &log);
  History history;
  int64_t done = 0;
  if (resume) {
    exe->set_parameters(resume->params);
    exe->set_state(resume->state);
    exe->set_optimizer_state(resume->optimizer_state);
    history = resume->history;
    done = resume->epoch;
    if (!history.epochs.empty()) exe->set_learning_rate(static_cast<float>(history.epochs.back().lr));
  }
  RunOutcome out{.history = {}, .device = exe->device(), .threads = num_threads()};
  if (c.progress != "quiet") {
    char line[320];
    std::snprintf(line, sizeof line,
                  "convoy: %s on Fashion-MNIST (%lld train, %lld test) | %s, %d threads | batch %lld, %s lr %g "
                  "momentum %g, %lld epochs, seed %llu%s\n",
                  c.model.c_str(), static_cast<long long>(data.train.size()), static_cast<long long>(data.test.size()),
                  out.device.c_str(), out.threads, static_cast<long long>(c.batch_size),
                  c.optimizer == "sgd" ? "SGD" : c.optimizer.c_str(), c.lr, c.momentum,
                  static_cast<long long>(c.epochs), static_cast<unsigned long long>(c.seed),
                  resume ? (", resuming after epoch " + std::to_string(done)).c_str() : "");
    log << line << std::flush;
  }
  FitOptions fit_options{.epochs = c.epochs, .seed = c.seed, .initial_epoch = done,
                         .steps_per_execution = c.steps_per_execution, .callbacks = make_callbacks(c, model, log)};
  exe->set_profiling(c.profile);
  out.history = fit(*exe, data.train, data.test, fit_options, std::move(history));
  if (c.profile) log << profile_table(exe->profile(), exe->profiled_steps()) << std::flush;
  const auto& h = out.history;
  if (h.epochs.empty()) return out;
  if (c.progress != "quiet") {
    char line[200];
    std::snprintf(line, sizeof line, "total training time %.2f s | test accuracy %.2f%% | %.0f images/s\n",
                  h.total_train_seconds, 100.0 * h.epochs.back().test_accuracy, h.images_per_second());
    log << line << std::flush;
  }
  if (!c.out_dir.empty()) {
    const fs::path dir(c.out_dir);
    io::RunInfo info{.model = c.model, .dataset = c.data_dir, .device = out.device, .threads = out.threads,
                     .epochs = c.epochs, .batch_size = c.batch_size, .lr = c.lr, .momentum = c.momentum,
                     .seed = c.seed};
    const EvaluationReport ev = evaluate_report(*exe, data.test, loss_kind(c));
    info.evaluation_json = evaluation_json(ev, kFashionMnistClasses);
    std::vector<float> params(model.num_parameters()), state(model.num_state());
    exe->get_parameters(params);
    exe->get_state(state);
    io::write_safetensors((dir / "model.safetensors").string(), io::to_named(model, params, state));
    io::write_file_atomic((dir / "summary.json").string(), io::run_summary_json(info, h));
    write_reports(dir, c, out, ev, data.test);
    if (c.progress != "quiet")
      log << "wrote " << c.out_dir << "/{summary.json,history.csv,model.safetensors," << kCheckpointFile
          << ",curves.png,predictions.png,confusion.png,report.html}" << std::endl;
  }
  return out;
}

std::string checkpoint_path(const std::string& dir) {
  const std::string path = (fs::path(dir) / kCheckpointFile).string();
  require(fs::exists(path), dir + ": no " + kCheckpointFile + " here; pass the --out folder of a convoy train run");
  return path;
}

}  // namespace

RunOutcome run_training(const RunConfig& config, std::ostream& log) { return run(config, std::nullopt, log); }

RunOutcome resume_training(const std::string& dir, std::ostream& log) {
  Checkpoint ck = load_checkpoint(checkpoint_path(dir));
  ck.config.out_dir = dir;
  return run(ck.config, ck, log);
}

// A checkpoint's model compiled with its weights, ready for inference.
std::unique_ptr<Executable> restore(const Checkpoint& ck) {
  set_num_threads(ck.config.threads);
  auto exe = compile_for(build_model(ck.config, data::kFashionMnistShape), ck.config);
  exe->set_parameters(ck.params);
  exe->set_state(ck.state);
  return exe;
}

Metrics evaluate_checkpoint(const std::string& dir) {
  const Checkpoint ck = load_checkpoint(checkpoint_path(dir));
  const data::TrainTest data = data::load_fashion_mnist(ck.config.data_dir);
  return evaluate(*restore(ck), data.test);
}

int64_t predict_to_csv(const std::string& dir, const std::string& images_idx, const std::string& output_csv) {
  const Checkpoint ck = load_checkpoint(checkpoint_path(dir));
  const Tensor raw = data::read_idx_u8(images_idx);
  const nn::Model model = build_model(ck.config, data::kFashionMnistShape);
  const Shape& want = model.input_shape();
  require(raw.shape().size() == 3 && raw.dim(1) == want[1] && raw.dim(2) == want[2],
          images_idx + ": images are " + to_string(raw.shape()) + ", the model takes [N, " + std::to_string(want[1]) +
              ", " + std::to_string(want[2]) + "]");
  // Labels are unknown; zeros keep the batch machinery unchanged.
  const data::LabeledImages images =
      data::from_u8(raw, Tensor(DType::u8, {raw.dim(0)}), data::kSeedMean, data::kSeedStd, images_idx);
  auto exe = restore(ck);
  const int64_t classes = exe->output_size();
  std::string csv = "id";
  for (const auto& name : kFashionMnistClasses) csv += "," + name;
  csv += "\n";
  char cell[32];
  std::vector<float> p(static_cast<std::size_t>(classes));
  const Loss loss = loss_kind(ck.config);
  for_each_output(*exe, images, [&](int64_t id, const float* row) {
    csv += std::to_string(id);
    output_probabilities(loss, row, classes, p.data());
    for (int64_t k = 0; k < classes; ++k) {
      std::snprintf(cell, sizeof cell, ",%.6f", p[k]);
      csv += cell;
    }
    csv += "\n";
  });
  io::write_file_atomic(output_csv, csv);
  return images.size();
}

}  // namespace convoy::train
