// The convoy binary: parses flags, calls the library, reports. Every error a
// user can cause prints one line and exits 2.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>

#include "convoy/backends/executable.h"
#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/model_weights.h"
#include "convoy/io/run_summary.h"
#include "convoy/nn/sequential.h"
#include "convoy/train/fit.h"

namespace {

struct TrainFlags {
  int64_t epochs = 50;
  int64_t batch_size = 128;
  double lr = 0.01;
  double momentum = 0.5;
  int threads = 0;
  uint64_t seed = 2;  // arbitrary; see docs/benchmarks.md for the spread over seeds
  std::string data = convoy::data::kFashionMnistDir;
  std::string out;
  bool summary = false;
};

void check_flags(const TrainFlags& f) {
  using convoy::require;
  require(f.epochs >= 1, "--epochs must be at least 1");
  require(f.batch_size >= 1, "--batch-size must be at least 1");
  require(f.lr > 0, "--lr must be positive");
  require(f.momentum >= 0 && f.momentum < 1, "--momentum must be in [0, 1)");
  require(f.threads >= 0, "--threads must be 0 (all cores) or positive");
}

int run_train(const TrainFlags& f) {
  using namespace convoy;
  check_flags(f);
  if (!f.out.empty()) io::ensure_writable_dir(f.out);  // fail now, not after training
  set_num_threads(f.threads);
  const int threads = num_threads();

  data::TrainTest data = data::load_fashion_mnist(f.data);
  nn::Sequential model = nn::seed_cnn();
  if (f.summary) std::cout << model.summary();

  CompileOptions options;
  options.batch_size = f.batch_size;
  options.loss = Loss::nll;
  options.sgd = {.lr = static_cast<float>(f.lr), .momentum = static_cast<float>(f.momentum)};
  auto exe = compile_cpu(model, options, f.seed);

  std::cout << "convoy: seed CNN on Fashion-MNIST (" << data.train.size() << " train, " << data.test.size()
            << " test) | " << exe->device() << ", " << threads << " threads | batch " << f.batch_size << ", SGD lr "
            << f.lr << " momentum " << f.momentum << ", " << f.epochs << " epochs, seed " << f.seed << std::endl;
  train::History history = train::fit(*exe, data.train, data.test, {.epochs = f.epochs, .seed = f.seed, .log = &std::cout});
  const auto& last = history.epochs.back();
  std::printf("total training time %.2f s | test accuracy %.2f%% | %.0f images/s\n", history.total_train_seconds,
              100.0 * last.test_accuracy, history.images_per_second());

  if (!f.out.empty()) {
    io::RunInfo info{.model = "seed_cnn", .dataset = f.data, .device = exe->device(), .threads = threads,
                     .epochs = f.epochs, .batch_size = f.batch_size, .lr = f.lr, .momentum = f.momentum,
                     .seed = f.seed};
    std::vector<float> params(model.num_parameters()), state(model.num_state());
    exe->get_parameters(params);
    exe->get_state(state);
    const std::filesystem::path out(f.out);
    io::write_safetensors((out / "model.safetensors").string(), io::to_named(model, params, state));
    io::write_file_atomic((out / "summary.json").string(), io::run_summary_json(info, history));
    std::cout << "wrote " << (out / "summary.json").string() << " and " << (out / "model.safetensors").string()
              << std::endl;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"convoy: train convolutional networks fast, in C++"};
  app.require_subcommand(1);
  TrainFlags flags;
  CLI::App* train = app.add_subcommand("train", "Train the seed CNN on Fashion-MNIST (the default job)");
  train->add_option("--epochs", flags.epochs, "Training epochs")->capture_default_str();
  train->add_option("--batch-size", flags.batch_size, "Examples per step")->capture_default_str();
  train->add_option("--lr", flags.lr, "SGD learning rate")->capture_default_str();
  train->add_option("--momentum", flags.momentum, "SGD momentum")->capture_default_str();
  train->add_option("--threads", flags.threads, "Worker threads (0 = all cores)")->capture_default_str();
  train->add_option("--seed", flags.seed, "Seed for initialisation and shuffling")->capture_default_str();
  train->add_option("--data", flags.data, "Folder with the Fashion-MNIST IDX files")->capture_default_str();
  train->add_option("--out", flags.out, "Folder for summary.json and model.safetensors");
  train->add_flag("--summary", flags.summary, "Print the model's layers and parameter counts first");

  // CLI11 would call an unknown command a missing one; name it instead.
  if (argc > 1 && argv[1][0] != '-' && std::string(argv[1]) != "train") {
    std::cerr << "convoy: error: unknown command '" << argv[1] << "'; commands: train (see 'convoy --help')"
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
    if (train->parsed()) return run_train(flags);
  } catch (const convoy::UserError& e) {
    std::cerr << "convoy: error: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "convoy: internal error: " << e.what() << " (please report this)" << std::endl;
    return 1;
  }
  return 0;
}
