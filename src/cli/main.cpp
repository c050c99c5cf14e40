// The convoy binary: parses flags, calls the library, reports. Every error a
// user can cause prints one line and exits 2.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <new>
#include <optional>
#include <set>

#include "convoy/backends/devices.h"
#include "convoy/core/cpu_info.h"
#include "convoy/core/error.h"
#include "convoy/core/temporary_files.h"
#include "convoy/core/untrusted.h"
#include "convoy/data/bad_examples.h"
#include "convoy/data/fashion_mnist.h"
#include "openmp_spin_default.h"
#include "plant_demo.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/onnx.h"
#include "convoy/io/pretrained.h"
#include "convoy/nn/zoo.h"
#include "convoy/records/shards.h"
#include "convoy/config/config_schema.h"
#include "convoy/config/config_warnings.h"
#include "convoy/app/console_reporter.h"
#include "convoy/config/data_defaults.h"
#include "convoy/app/export.h"
#include "convoy/app/crash_report.h"
#include "convoy/app/graceful_stop.h"
#include "convoy/app/predict.h"
#include "convoy/app/run.h"

namespace {

using convoy::train::RunConfig;

// A config key's flag (config_schema()): the text given, or set for a switch.
struct KeyFlag {
  std::optional<std::string> text;
  bool on = false;
  bool given() const { return text || on; }
};

// Flags given on the command line; each overrides the config file's key.
struct TrainFlags {
  std::string config, resume;
  std::map<std::string, KeyFlag> keys;  // by dotted key: every key with a flag ("optimizer.lr": --lr)
  std::optional<int64_t> image_size;
  std::vector<std::string> sets;  // --set key=value, in order
  bool quiet = false;
  bool has(const std::string& key) const { return keys.at(key).given(); }
};

// Reads one given key flag into the config, typed and checked as the key in a file.
void apply_key_flag(const convoy::train::ConfigKey& key, const KeyFlag& flag, RunConfig& c) {
  const nlohmann::json value = flag.on ? nlohmann::json(true) : convoy::train::config_value_from_text(key, *flag.text, key.flag);
  key.read(value, c, key.flag);
}

// How to run, as opposed to what to train: may change on --resume too.
void apply_how_to_run_flags(const TrainFlags& f, RunConfig& c) {
  for (const auto& key : convoy::train::config_schema())
    if (key.how_to_run && !key.flag.empty() && f.has(key.name)) apply_key_flag(key, f.keys.at(key.name), c);
  if (f.quiet) c.progress = "quiet";
}

// The config file, then --set, then the flags; the keys nobody gave come from
// the data (choose_from_data), said in `chosen` (printed first).
RunConfig resolve(const TrainFlags& f, std::string* chosen = nullptr) {
  convoy::train::LoadedConfig loaded = convoy::train::load_run_config(f.config, f.sets);
  RunConfig& c = loaded.config;
  std::set<std::string>& given = loaded.given;
  for (const auto& key : convoy::train::config_schema()) {
    if (key.flag.empty() || !f.has(key.name)) continue;
    if (key.name == "optimizer.momentum")
      // Adam and AdamW have none (beta1 plays its part): a flag they would ignore is an error, not silence.
      convoy::require(c.optimizer == "sgd" || c.optimizer == "rmsprop",
                      "--momentum: the " + c.optimizer + " optimizer has no momentum (optimizer.beta1 plays that "
                      "part); drop --momentum, or use sgd or rmsprop");
    apply_key_flag(key, f.keys.at(key.name), c);
    given.insert(key.name);
  }
  if (f.has("model.name")) c.layers.clear();  // a zoo model instead of the file's layer list
  if (f.image_size) {
    c.data.width = c.data.height = *f.image_size;
    given.insert({"data.width", "data.height"});
  }
  if (f.quiet) c.progress = "quiet";
  const std::string line = convoy::train::choose_from_data(c, given);
  if (chosen) *chosen = line;
  convoy::require(!f.image_size || c.data.reads_images(),
                  "--image-size: Fashion-MNIST's IDX images are 28x28 gray and are not resized; use it with image "
                  "data (class folders, a CSV)");
  for (const std::string& w : convoy::train::ignored_settings(c, given)) std::cerr << "convoy: warning: " << w << "\n";
  convoy::train::validate(c);
  return c;
}

// What a key flag's value is, in --help.
const char* metavar(convoy::train::KeyType type) {
  switch (type) {
    case convoy::train::KeyType::whole: return "N";
    case convoy::train::KeyType::number: return "X";
    case convoy::train::KeyType::path: return "PATH";
    default: return "TEXT";
  }
}

// `convoy help config [--markdown]`: every run-config key (the README's table with --markdown).
int run_help(const std::string& topic, bool markdown) {
  convoy::require(topic == "config", "help: unknown topic '" + topic + "'; the one there is: config");
  std::cout << (markdown ? convoy::train::config_keys_markdown() : convoy::train::config_keys_text());
  return 0;
}

// --resume DIR --epochs N trains on to epoch N; 0: to the run's own end.
int64_t resume_epochs(const TrainFlags& f) {
  if (!f.has("training.epochs")) return 0;
  RunConfig c;
  apply_key_flag(*convoy::train::find_config_key("training.epochs"), f.keys.at("training.epochs"), c);
  // 0 would mean "the run's own end" to resume_training: a given --epochs 0 is an error, not that.
  convoy::require(c.epochs >= 1, "--epochs " + std::to_string(c.epochs) + ": --resume trains on to epoch N, so give "
                                 "an N above the epochs the run has trained, or leave --epochs out to finish its own");
  return c.epochs;
}

// SIGINT/SIGTERM stopped the run after a step: say how to continue; exit 128 + signal.
int stopped(const convoy::train::RunOutcome& outcome, const std::string& dir) {
  std::cout << std::flush;
  std::cerr << "convoy: stopped by " << convoy::train::signal_name(outcome.stopped_by_signal)
            << "; the checkpoint in " << dir << " has the position; continue with: convoy train --resume " << dir
            << std::endl;
  return 128 + outcome.stopped_by_signal;
}

// A test pause in milliseconds from the environment (0 when unset).
int test_pause_ms(const char* variable) {
  const char* v = std::getenv(variable);
  return v ? std::max(0, std::atoi(v)) : 0;
}

// The crash tests' pacing (FaultInjection, app/run.h; tests/kill_resume.sh),
// read from the environment here, at the application's edge: the library
// never reads it.
convoy::train::FaultInjection fault_injection_from_environment() {
  return {.step_delay_ms = test_pause_ms("CONVOY_TEST_STEP_DELAY_MS"),
          .checkpoint_pause_ms = test_pause_ms("CONVOY_TEST_CHECKPOINT_DELAY_MS"),
          .load_pause_ms = test_pause_ms("CONVOY_TEST_LOAD_DELAY_MS"),
          .report_pause_ms = test_pause_ms("CONVOY_TEST_REPORT_DELAY_MS")};
}

int run_train(const TrainFlags& f) {
  if (!f.resume.empty()) {
    bool what_to_train = !f.config.empty() || f.image_size || !f.sets.empty();
    for (const auto& key : convoy::train::config_schema())
      if (!key.flag.empty() && !key.how_to_run && key.name != "training.epochs" && key.name != "training.threads" &&
          key.name != "training.precision")
        what_to_train = what_to_train || f.has(key.name);
    convoy::require(!what_to_train, "--resume continues a run with its own settings; pass no other training flags "
                                    "(but --epochs N to train on to epoch N)");
    // The thread count orders the sums, so another one would break the exact resume.
    convoy::require(!f.has("training.threads"), "--threads: --resume keeps the run's own thread count, so that it "
                                                "continues bit for bit; resume without --threads");
    const auto outcome =
        convoy::train::resume_training(f.resume, std::cout, [&](RunConfig& c) {
          // The precision changes every step's bits, so a resume keeps the run's own.
          const KeyFlag& precision = f.keys.at("training.precision");
          convoy::require(!precision.text || *precision.text == c.precision,
                          "--precision " + precision.text.value_or("") + ": the run in " + f.resume + " trained in " +
                              c.precision + " and a resume keeps it; resume without --precision, or start a new run");
          apply_how_to_run_flags(f, c);
        }, resume_epochs(f), fault_injection_from_environment());
    return outcome.stopped_by_signal ? stopped(outcome, f.resume) : 0;
  }
  std::string chosen;
  const RunConfig c = resolve(f, &chosen);
  if (!chosen.empty() && c.progress != "quiet") std::cout << chosen << std::endl;
  // The library itself prints nothing: the console is this reporter.
  convoy::train::ConsoleReporter console(std::cout, c.progress, &std::cerr);
  const auto outcome = convoy::train::run_training(c, &console, fault_injection_from_environment());
  if (outcome.stopped_by_signal) {
    if (c.out_dir.empty()) {
      std::cerr << "convoy: stopped by " << convoy::train::signal_name(outcome.stopped_by_signal)
                << "; nothing saved (no --out folder)" << std::endl;
      return 128 + outcome.stopped_by_signal;
    }
    return stopped(outcome, c.out_dir);
  }
  if (c.progress == "quiet" && outcome.primary && !outcome.history.epochs.empty())
    std::printf("test_accuracy %.4f\n", outcome.history.kept().test_accuracy);
  return 0;
}

// `convoy shards`: a CSV manifest or class folders → TFRecord shards.
struct ShardFlags {
  std::string csv, folder, images = "images", id_column = "image_id", label_column, extension = ".jpg";
  std::vector<std::string> classes;
  std::string on_bad_example = "fail";
  convoy::records::ShardOptions out;
};

int run_shards(const ShardFlags& f) {
  namespace records = convoy::records;
  convoy::require(f.csv.empty() != f.folder.empty(), "shards: pass either --csv FILE or --folder DIR (one of them)");
  // Not the root, nor among what is read: shards inside --folder would be the next run's class 'shards'.
  const std::string read_from = f.csv.empty() ? f.folder : records::csv_image_folder(f.csv, f.images);
  convoy::require_output_placed(f.out.out_dir, read_from, true, "shards --out", "--out shards");
  const auto policy = convoy::data::parse_on_bad_example(f.on_bad_example, "--on-bad-example");
  const records::Manifest manifest =
      f.csv.empty() ? records::read_folder_manifest(f.folder, {.classes = f.classes, .on_bad_example = policy})
                    : records::read_csv_manifest(f.csv, {.id_column = f.id_column,
                                                         .label_column = f.label_column,
                                                         .classes = f.classes,
                                                         .image_dir = f.images,
                                                         .extension = f.extension,
                                                         .on_bad_example = policy});
  const records::ShardsWritten w = records::write_shards(manifest, f.out);
  uint64_t bytes = 0;
  for (const auto& s : w.shards) bytes += s.bytes;
  std::printf("wrote %zu shards to %s: %lld examples, %.1f MB, %zu classes\n", w.shards.size(), f.out.out_dir.c_str(),
              static_cast<long long>(w.examples), bytes / 1e6, manifest.classes.size());
  return 0;
}

int run_devices() {
  const convoy::CpuInfo cpu = convoy::cpu_info();
  std::string isa;
  for (const auto& f : cpu.isa) isa += (isa.empty() ? "" : " ") + f;
  std::printf("cpu   %s | %d threads | %s\n", cpu.model.c_str(), cpu.threads, isa.c_str());
  std::string sets;
  for (auto k : {convoy::KernelSet::base, convoy::KernelSet::avx2, convoy::KernelSet::avx512})
    if (convoy::cpu_runs(k)) sets += std::string(sets.empty() ? "" : ", ") + convoy::kernel_set_name(k);
  std::printf("cpu   kernels: %s (this CPU runs %s)\n", convoy::kernel_set_name(convoy::best_kernel_set()),
              sets.c_str());
  const std::string no_bf16 = convoy::cpu_bf16_missing();
  const char* bf16 = convoy::cpu_bf16_on_amx() ? "yes (AMX-BF16)" : "yes (AVX512-BF16, no AMX)";
  std::printf("cpu   --precision bf16: %s\n", no_bf16.empty() ? bf16 : ("no: " + no_bf16).c_str());
  std::printf("cpu   idle OpenMP threads in training: %s\n", convoy::cli::openmp_idle_policy().c_str());
  const convoy::GpuReport& gpus = convoy::find_gpus();
  for (const auto& g : gpus.gpus)
    std::printf("cuda:%d  %s | %.1f GiB | compute capability %d.%d\n", g.index, g.name.c_str(),
                static_cast<double>(g.memory_bytes) / (1 << 30), g.major, g.minor);
  if (!gpus.versions.empty()) std::printf("cuda  %s\n", gpus.versions.c_str());
  if (!gpus.usable()) std::printf("cuda  none usable: %s\n", gpus.why_unusable.c_str());
  // PJRT plugins (docs/accelerators.md): each known name, found or why not.
  for (const char* name : {"pjrt", "tpu", "pjrt-gpu"}) {
    const convoy::PjrtReport& p = convoy::find_pjrt(name);
    if (!p.usable()) {
      std::printf("%-5s none usable: %s\n", name, p.why_unusable.c_str());
      continue;
    }
    std::printf("%-5s %s | %s | %s\n", name, p.platform.c_str(), p.plugin.c_str(), p.version.c_str());
    for (const auto& d : p.devices) std::printf("%s:%s\n", name, d.c_str());
  }
  std::printf("auto  picks: %s\n", gpus.usable() ? "cuda:0" : "cpu");
  return 0;
}

// `convoy summary --model resnet18 [--classes 4] [--image-size 128] [--weights sd.safetensors [--skip fc.]]`:
// a zoo model's table, and whether a PyTorch state dict loads onto it.
// `convoy summary --onnx model.onnx`: the model an ONNX file imports as.
struct SummaryFlags {
  std::string model, weights, onnx;
  std::optional<int64_t> classes, image_size;
  std::vector<std::string> skip;
};

int run_summary(const TrainFlags& f, const SummaryFlags& s) {
  if (!s.onnx.empty()) {
    convoy::require(s.model.empty() && f.config.empty(), "summary: pass --onnx alone");
    const convoy::io::ImportedModel m = convoy::io::load_onnx(s.onnx);
    std::cout << m.model.summary();
    if (m.input_was_nhwc)
      std::cout << "The file takes NHWC images (TensorFlow's layout); this model takes them as NCHW.\n";
    if (m.softmax_dropped)
      std::cout << "The file's last op, Softmax, is left out: this model outputs logits (softmax gives the file's "
                   "probabilities).\n";
    return 0;
  }
  convoy::require(s.model.empty() || f.config.empty(), "summary: pass --config or --model, not both");
  convoy::require(!s.model.empty() || (s.weights.empty() && !s.classes && !s.image_size),
                  "summary: --weights, --classes and --image-size need --model");
  if (s.model.empty()) {
    const RunConfig c = resolve(f);
    std::cout << convoy::train::build_model(c, convoy::train::model_input_shape(c), convoy::train::model_classes(c))
                     .summary();
    return 0;
  }
  // The seed CNN's 1x28x28 input and 10 classes are fixed: model_by_name would ignore the flags.
  convoy::require(s.model != "seed_cnn" || (!s.classes && !s.image_size),
                  "summary --model seed_cnn: its 1x28x28 input and 10 classes are fixed; drop --classes and "
                  "--image-size, or pick another --model");
  convoy::nn::ZooOptions o;
  if (s.classes) o.classes = *s.classes;
  if (s.image_size) o.input = {3, *s.image_size, *s.image_size};
  const convoy::nn::Model m = convoy::nn::model_by_name(s.model, o);
  if (!s.weights.empty()) {
    convoy::io::FlatWeights w{m.initial_parameters(1), m.initial_state()};
    const int n = convoy::io::load_pytorch_weights(m, s.weights, w, {.skip_prefixes = s.skip});
    std::cout << m.summary() << "Loaded " << n << " tensors from " << s.weights << "\n";
    return 0;
  }
  std::cout << m.summary();
  return 0;
}

struct DemoFlags {
  std::string kind, size = "600x400";
  convoy::image::PlantDemoOptions plant;
};

int run_demo_data(DemoFlags d) {
  convoy::require(d.kind == "plant", "demo-data: unknown data set '" + d.kind + "'; the one there is: plant");
  int w = 0, h = 0;
  char rest = 0;
  convoy::require(std::sscanf(d.size.c_str(), "%dx%d%c", &w, &h, &rest) == 2,
                  "--size must be WIDTHxHEIGHT, like 600x400, got '" + d.size + "'");
  d.plant.width = w;
  d.plant.height = h;
  const auto s = convoy::image::write_plant_demo(d.plant);
  std::printf("wrote %s: %lld train images (", d.plant.out_dir.c_str(), static_cast<long long>(d.plant.train));
  for (std::size_t c = 0; c < s.train_per_class.size(); ++c)
    std::printf("%s%s %lld", c ? ", " : "", convoy::image::kPlantClasses[c], static_cast<long long>(s.train_per_class[c]));
  std::printf("), %lld test images, %dx%d JPEG\n", static_cast<long long>(d.plant.test), w, h);
  return 0;
}

// `convoy export --checkpoint DIR --onnx model.onnx [--keep-batch-norm]`.
int run_export(const std::string& checkpoint, const std::string& onnx, bool keep_batch_norm) {
  const auto s = convoy::train::export_checkpoint_onnx(checkpoint, onnx, {.fold_batch_norm = !keep_batch_norm}, std::cerr);
  std::printf("wrote %s (ONNX opset 13: %lld nodes, %lld weight tensors, %lld bytes)\n", onnx.c_str(),
              static_cast<long long>(s.nodes), static_cast<long long>(s.initializers), static_cast<long long>(s.bytes));
  return 0;
}

// `--output -`: the CSV alone on standard output (for a pipe), every other line on stderr.
int run_predict(const std::string& checkpoint, const std::string& input, const std::string& output, int top_k) {
  const bool to_stdout = output == "-";
  const convoy::train::Predictions p = convoy::train::predict(checkpoint, {.input = input, .output = output});
  for (const auto& s : p.skipped) std::cerr << "convoy: skipped " << s << "\n";
  std::ostream& say = to_stdout ? std::cerr : std::cout;
  if (top_k > 0) say << convoy::train::top_k_table(p, top_k);
  if (to_stdout) {
    std::cout << p.csv << std::flush;
    convoy::require(std::cout.good(), "--output -: cannot write the predictions to standard output (is it closed or "
                                      "a full disk?); name a file with --output");
  }
  const std::size_t n = p.ids.size();
  say << "wrote " << (to_stdout ? "to standard output" : p.output) << " (" << n << " row" << (n == 1 ? "" : "s")
      << ": " << (p.input_kind == "idx" || p.input_kind == "csv" ? "id" : "file") << ", then the probabilities of "
      << p.classes.size() << " classes)" << std::endl;
  return 0;
}

int run_evaluate(const std::string& checkpoint) {
  const convoy::Metrics m = convoy::train::evaluate_checkpoint(checkpoint);
  std::printf("test_loss %.4f  test_accuracy %.4f  (%lld images)\n", m.mean_loss(), m.accuracy(),
              static_cast<long long>(m.count));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // May re-execute the program, so before anything else; only for the commands that run a model for
  // long enough to repay the ~60 ms a second start costs.
  if (argc > 1 && (std::strcmp(argv[1], "train") == 0 || std::strcmp(argv[1], "evaluate") == 0 ||
                   std::strcmp(argv[1], "predict") == 0))
    convoy::cli::adopt_openmp_spin_default(argv);
  // Last out on every return path, after each run's executables are gone.
  struct ReleasePjrt {
    ~ReleasePjrt() { convoy::release_pjrt_clients(); }
  } release_pjrt;
  // Before any thread starts, so that all inherit the block (app/graceful_stop.h says why).
  convoy::train::take_stop_signals_on_their_own_thread();
  // A file-size limit (ulimit -f) then makes write() fail with EFBIG, which
  // convoy reports like a full disk, instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  convoy::train::install_crash_report();  // an abort or fault names itself on stderr
  CLI::App app{"convoy: train convolutional networks fast, in C++"};
  app.require_subcommand(1);
  // A path given as '' (an unset shell variable): refused, not read as "not given" ('--resume ""' started a new
  // run, '--config ""' trained the defaults, '--input ""' predicted the test CSV).
  const CLI::Validator a_path(
      [](const std::string& s) { return s.empty() ? std::string("the path is empty; name a file or folder") : std::string(); },
      "");  // no text in --help: the option's own type name stays
  TrainFlags f;
  CLI::App* train = app.add_subcommand("train", "Train a model (default: the seed CNN on Fashion-MNIST)");
  train->add_option("--config", f.config, "Run config (.json, .yaml); flags override its keys")->check(a_path);
  train->add_option("--resume", f.resume, "Continue the run saved in this --out folder")->check(a_path);
  // Every config key with a flag, its help and default from config_schema().
  for (const auto& key : convoy::train::config_schema()) {
    if (key.flag.empty()) continue;
    KeyFlag& k = f.keys[key.name];
    if (key.type == convoy::train::KeyType::boolean) train->add_flag(key.flag, k.on, convoy::train::flag_help(key));
    else if (key.type == convoy::train::KeyType::path)
      train->add_option(key.flag, k.text, convoy::train::flag_help(key))->type_name(metavar(key.type))->check(a_path);
    else train->add_option(key.flag, k.text, convoy::train::flag_help(key))->type_name(metavar(key.type));
  }
  train->add_option("--image-size", f.image_size, "Image data: resize to N x N [from the first image, at most 128]")
      ->check(CLI::Range(8, 4096));
  train->add_option("--set", f.sets, "Any config key: --set optimizer.lr=3e-4 --set data.augment.horizontal_flip=true "
                                     "('convoy help config' lists them)")
      ->allow_extra_args(false);
  train->add_flag("--quiet", f.quiet, "Print only the final test accuracy");
  std::string checkpoint, input, output;
  CLI::App* evaluate = app.add_subcommand("evaluate", "Evaluate a checkpoint on its test data");
  evaluate->add_option("--checkpoint", checkpoint, "The --out folder of a train run")->required()->check(a_path);
  CLI::App* predict = app.add_subcommand("predict", "Class probabilities for images, as a submission CSV");
  predict->add_option("--checkpoint", checkpoint, "The --out folder of a train run")->required()->check(a_path);
  predict->add_option("--input", input,
                      "An image, a folder of images (searched below too) or a test CSV of ids [the run's "
                      "data.test_csv]; a Fashion-MNIST run: an IDX file of uint8 [N, 28, 28] images")
      ->check(a_path);
  predict->add_option("--output", output,
                      "CSV to write: file (or id) and one probability column per class; - for standard output "
                      "[DIR/predictions.csv; for a CSV input DIR/submission.csv]")
      ->check(a_path);
  int top_k = 0;
  // A whole number from 1 up: PositiveNumber took 0.5 for an int64 and huge values it then narrowed.
  const CLI::Range whole_from_one(1, std::numeric_limits<int>::max());
  predict->add_option("--top-k", top_k, "Also print each input's K most probable classes")->check(whole_from_one);
  std::string onnx_path;
  bool keep_batch_norm = false;
  CLI::App* export_cmd = app.add_subcommand("export", "Write a checkpoint's inference graph as ONNX");
  export_cmd->add_option("--checkpoint", checkpoint, "The --out folder of a train run")->required()->check(a_path);
  export_cmd->add_option("--onnx", onnx_path, "ONNX file to write")->required();
  export_cmd->add_flag("--keep-batch-norm", keep_batch_norm, "Keep batch norms as nodes instead of folding them into convolutions");
  CLI::App* summary = app.add_subcommand("summary", "Print a model's layers, output shapes and parameter counts");
  SummaryFlags summary_flags;
  summary->add_option("--config", f.config, "Run config naming the model")->check(a_path);
  summary->add_option("--model", summary_flags.model, "A zoo model: seed_cnn, plant_cnn, resnet18, resnet34, resnet50, mobilenet_v2, efficientnet_b0, efficientnet_lite0, tf_efficientnet_lite0");
  summary->add_option("--classes", summary_flags.classes, "Classes of the zoo model's head [its own]")->check(whole_from_one);
  summary->add_option("--image-size", summary_flags.image_size, "Square RGB input size of the zoo model [224]")->check(CLI::Range(8, 4096));
  summary->add_option("--weights", summary_flags.weights, "A PyTorch state dict (.safetensors) to load onto the model, by tensor name")->check(a_path);
  summary->add_option("--onnx", summary_flags.onnx, "An ONNX file to import (the model it becomes)")->check(a_path);
  summary->add_option("--skip", summary_flags.skip, "Tensor name prefixes to leave out of --weights (a new head: fc.)");
  app.add_subcommand("devices", "List the devices convoy can train on");
  // Seeds are unsigned: "-1" would otherwise wrap to 18446744073709551615.
  const auto seed_check = CLI::Validator(
      [](const std::string& s) { return s.find('-') == std::string::npos ? std::string() : "a seed is a whole number >= 0"; },
      "SEED");
  ShardFlags sf;
  CLI::App* shards = app.add_subcommand("shards", "Write TFRecord shards from a CSV + image folder or class folders");
  shards->add_option("--csv", sf.csv, "Manifest CSV (e.g. train.csv: image_id and 0/1 class columns)")->check(a_path);
  shards->add_option("--folder", sf.folder, "Folder with one subfolder of images per class")->check(a_path);
  shards->add_option("--images", sf.images, "CSV: image folder, relative to the CSV's folder [images]");
  shards->add_option("--id-column", sf.id_column, "CSV: the image id column [image_id]");
  shards->add_option("--label-column", sf.label_column, "CSV: a column of class names (default: 0/1 class columns)");
  shards->add_option("--extension", sf.extension, "CSV: appended to the id to name the image [.jpg]");
  shards->add_option("--classes", sf.classes, "Class names in label order (default: inferred, sorted)")->delimiter(',');
  shards->add_option("--on-bad-example", sf.on_bad_example, "CSV rows that cannot be used: fail or skip [fail]");
  shards->add_option("--out", sf.out.out_dir, "Output folder")->required()->check(a_path);
  shards->add_option("--prefix", sf.out.prefix, "Shard name prefix [train]");
  shards->add_option("--shard-mb", sf.out.shard_mb, "Target shard size in MB [100]");
  shards->add_option("--seed", sf.out.seed, "Seed for shuffling examples across shards [0]")->check(seed_check);
  shards->add_flag("--gzip", sf.out.gzip, "gzip-compress the shards (.tfrecord.gz)");
  DemoFlags demo;
  CLI::App* demo_data = app.add_subcommand("demo-data", "Write a small demo data set in a real data set's layout");
  demo_data->add_option("kind", demo.kind, "plant: Plant Pathology 2020's layout (CSV + JPEG folder); the images are not leaves but "
                        "Fashion-MNIST clothes stamped on textured green (healthy: trouser, multiple_diseases: shirt, "
                        "rust: sneaker, scab: coat), a stand-in to try the workflow on")->required();
  demo_data->add_option("--out", demo.plant.out_dir, "Folder to write (new, empty or a previous demo)")->required()->check(a_path);
  demo_data->add_option("--train", demo.plant.train, "Training images [400]");
  demo_data->add_option("--test", demo.plant.test, "Test images [100]");
  demo_data->add_option("--size", demo.size, "Image size WIDTHxHEIGHT [600x400]");
  demo_data->add_option("--seed", demo.plant.seed, "Seed: same seed, same files [1]")->check(seed_check);

  std::string help_topic;
  bool help_markdown = false;
  CLI::App* help_cmd = app.add_subcommand("help", "Describe settings: 'convoy help config' lists every run-config key");
  help_cmd->add_option("topic", help_topic, "config: each key of a run config, its flag, type, default and range")
      ->required();
  help_cmd->add_flag("--markdown", help_markdown, "As a Markdown table (the README's)");

  // CLI11 would call an unknown command a missing one; name it instead.
  const auto known = [&](const std::string& name) {
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      if (sub->get_name() == name) return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !known(argv[1])) {
    std::cerr << "convoy: error: unknown command '" << argv[1] << "'; commands: train, evaluate, predict, export, summary, devices, shards, demo-data, help (see 'convoy --help')"
              << std::endl;
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "convoy: error: " << convoy::one_line(e.what()) << "; see 'convoy --help'" << std::endl;
    return 2;
  }
  // SIGINT/SIGTERM from here on: one line and exit 130 / 143 at once, or,
  // inside a training run's fit, a checkpoint after the step (graceful_stop.h).
  const convoy::train::ExitOnSignals exit_on_signals;
  // The signal tests' pause inside every output write (tests/interrupted_writes.sh).
  if (const int pause = test_pause_ms("CONVOY_TEST_WRITE_DELAY_MS")) convoy::io::set_test_write_pause_ms(pause);
  try {
    if (train->parsed()) return run_train(f);
    if (evaluate->parsed()) return run_evaluate(checkpoint);
    if (predict->parsed()) return run_predict(checkpoint, input, output, top_k);
    if (export_cmd->parsed()) return run_export(checkpoint, onnx_path, keep_batch_norm);
    if (summary->parsed()) return run_summary(f, summary_flags);
    if (app.got_subcommand("devices")) return run_devices();
    if (shards->parsed()) return run_shards(sf);
    if (demo_data->parsed()) return run_demo_data(demo);
    if (help_cmd->parsed()) return run_help(help_topic, help_markdown);
  } catch (const convoy::UserError& e) {
    if (convoy::process_ending()) convoy::wait_for_the_end();  // a stop's sweep removed a file under a write
    std::cerr << "convoy: error: " << convoy::one_line(e.what()) << std::endl;
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "convoy: error: out of memory; use a smaller --batch-size or free memory" << std::endl;
    return 2;
  } catch (const std::exception& e) {
    if (convoy::process_ending()) convoy::wait_for_the_end();
    std::cerr << "convoy: internal error: " << convoy::one_line(e.what()) << " (please report this)" << std::endl;
    return 1;
  }
  return 0;
}
