// The convoy binary: parses flags, calls the library, reports. Every error a
// user can cause prints one line and exits 2.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <optional>

#include "convoy/core/cpu_info.h"
#include "convoy/core/error.h"
#include "convoy/io/pretrained.h"
#include "convoy/nn/zoo.h"
#include "convoy/train/run.h"

namespace {

using convoy::train::RunConfig;

// Flags given on the command line; each overrides the config file's key.
struct TrainFlags {
  std::string config, resume;
  std::optional<int64_t> epochs, batch_size;
  std::optional<double> lr, momentum;
  std::optional<int> threads;
  std::optional<uint64_t> seed;
  std::optional<std::string> data, out, progress;
  bool quiet = false, profile = false;
};

RunConfig resolve(const TrainFlags& f) {
  RunConfig c = f.config.empty() ? RunConfig{} : convoy::train::load_run_config(f.config);
  if (f.epochs) c.epochs = *f.epochs;
  if (f.batch_size) c.batch_size = *f.batch_size;
  if (f.lr) c.lr = *f.lr;
  if (f.momentum) c.momentum = *f.momentum;
  if (f.threads) c.threads = *f.threads;
  if (f.seed) c.seed = *f.seed;
  if (f.data) c.data_dir = *f.data;
  if (f.out) c.out_dir = *f.out;
  if (f.progress) c.progress = *f.progress;
  if (f.quiet) c.progress = "quiet";
  if (f.profile) c.profile = true;
  return c;
}

int run_train(const TrainFlags& f) {
  if (!f.resume.empty()) {
    convoy::require(f.config.empty() && !f.epochs && !f.batch_size && !f.lr && !f.momentum && !f.seed && !f.data &&
                        !f.out,
                    "--resume continues a run with its own settings; pass no other training flags");
    convoy::train::resume_training(f.resume, std::cout);
    return 0;
  }
  const RunConfig c = resolve(f);
  const auto outcome = convoy::train::run_training(c, std::cout);
  if (c.progress == "quiet" && !outcome.history.epochs.empty())
    std::printf("test_accuracy %.4f\n", outcome.history.epochs.back().test_accuracy);
  return 0;
}

int run_devices() {
  const convoy::CpuInfo cpu = convoy::cpu_info();
  std::string isa;
  for (const auto& f : cpu.isa) isa += (isa.empty() ? "" : " ") + f;
  std::printf("cpu   %s | %d threads | %s\n", cpu.model.c_str(), cpu.threads, isa.c_str());
  std::printf("cuda  not built into this binary (the CUDA backend is a later issue)\n");
  std::printf("auto  picks: cpu\n");
  return 0;
}

// `convoy summary --model resnet18 [--classes 4] [--image-size 128] [--weights sd.safetensors [--skip fc.]]`:
// a zoo model's table, and whether a PyTorch state dict loads onto it.
struct SummaryFlags {
  std::string model, weights;
  std::optional<int64_t> classes, image_size;
  std::vector<std::string> skip;
};

int run_summary(const TrainFlags& f, const SummaryFlags& s) {
  convoy::require(s.model.empty() || f.config.empty(), "summary: pass --config or --model, not both");
  convoy::require(!s.model.empty() || (s.weights.empty() && !s.classes && !s.image_size),
                  "summary: --weights, --classes and --image-size need --model");
  if (s.model.empty()) {
    std::cout << convoy::nn::model_by_name(resolve(f).model).summary();
    return 0;
  }
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

int run_evaluate(const std::string& checkpoint) {
  const convoy::Metrics m = convoy::train::evaluate_checkpoint(checkpoint);
  std::printf("test_loss %.4f  test_accuracy %.4f  (%lld images)\n", m.mean_loss(), m.accuracy(),
              static_cast<long long>(m.count));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"convoy: train convolutional networks fast, in C++"};
  app.require_subcommand(1);
  TrainFlags f;
  CLI::App* train = app.add_subcommand("train", "Train a model (default: the seed CNN on Fashion-MNIST)");
  train->add_option("--config", f.config, "Run config (.json, .yaml); flags override its keys");
  train->add_option("--resume", f.resume, "Continue the run saved in this --out folder");
  train->add_option("--epochs", f.epochs, "Training epochs [50]");
  train->add_option("--batch-size", f.batch_size, "Examples per step [128]");
  train->add_option("--lr", f.lr, "SGD learning rate [0.01]");
  train->add_option("--momentum", f.momentum, "SGD momentum [0.5]");
  train->add_option("--threads", f.threads, "Worker threads, 0 = all cores [0]");
  train->add_option("--seed", f.seed, "Seed for initialisation and shuffling [2]");
  train->add_option("--data", f.data, "Folder with the Fashion-MNIST IDX files");
  train->add_option("--out", f.out, "Folder for checkpoint, history.csv, summary.json, model.safetensors");
  train->add_option("--progress", f.progress, "auto, bar, lines or quiet [auto]");
  train->add_flag("--quiet", f.quiet, "Print only the final test accuracy");
  train->add_flag("--profile", f.profile, "Print per-layer forward/backward time and GFLOP/s at the end");
  std::string checkpoint, input, output;
  CLI::App* evaluate = app.add_subcommand("evaluate", "Evaluate a checkpoint on its test data");
  evaluate->add_option("--checkpoint", checkpoint, "The --out folder of a train run")->required();
  CLI::App* predict = app.add_subcommand("predict", "Class probabilities for images, as a submission CSV");
  predict->add_option("--checkpoint", checkpoint, "The --out folder of a train run")->required();
  predict->add_option("--input", input, "IDX file of uint8 images [N, H, W] (raw or .gz)")->required();
  predict->add_option("--output", output, "CSV to write: id and one probability column per class")->required();
  CLI::App* summary = app.add_subcommand("summary", "Print a model's layers, output shapes and parameter counts");
  SummaryFlags sf;
  summary->add_option("--config", f.config, "Run config naming the model");
  summary->add_option("--model", sf.model, "A zoo model: seed_cnn, plant_cnn, resnet18, resnet34, resnet50, mobilenet_v2, efficientnet_b0, efficientnet_lite0");
  summary->add_option("--classes", sf.classes, "Classes of the zoo model's head [its own]")->check(CLI::PositiveNumber);
  summary->add_option("--image-size", sf.image_size, "Square RGB input size of the zoo model [224]")->check(CLI::PositiveNumber);
  summary->add_option("--weights", sf.weights, "A PyTorch state dict (.safetensors) to load onto the model, by tensor name");
  summary->add_option("--skip", sf.skip, "Tensor name prefixes to leave out of --weights (a new head: fc.)");
  app.add_subcommand("devices", "List the devices convoy can train on");

  // CLI11 would call an unknown command a missing one; name it instead.
  const auto known = [&](const std::string& name) {
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      if (sub->get_name() == name) return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !known(argv[1])) {
    std::cerr << "convoy: error: unknown command '" << argv[1] << "'; commands: train, evaluate, predict, summary, devices (see 'convoy --help')"
              << std::endl;
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "convoy: error: " << e.what() << "; see 'convoy --help'" << std::endl;
    return 2;
  }
  try {
    if (train->parsed()) return run_train(f);
    if (evaluate->parsed()) return run_evaluate(checkpoint);
    if (predict->parsed()) {
      const int64_t rows = convoy::train::predict_to_csv(checkpoint, input, output);
      std::printf("wrote %s (%lld rows)\n", output.c_str(), static_cast<long long>(rows));
      return 0;
    }
    if (summary->parsed()) return run_summary(f, sf);
    if (app.got_subcommand("devices")) return run_devices();
  } catch (const convoy::UserError& e) {
    std::cerr << "convoy: error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "convoy: internal error: " << e.what() << " (please report this)" << std::endl;
    return 1;
  }
  return 0;
}
