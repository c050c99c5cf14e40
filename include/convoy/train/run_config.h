#pragma once
// A run described as data: what `convoy train` does, from a JSON or YAML file
// (configs/*.yaml), from flags, or both (flags override the file). Every key
// is checked: an unknown key or a wrong type is a UserError naming the key and
// the file.
#include <cstdint>
#include <optional>
#include <string>

#include "convoy/train/callbacks.h"

namespace convoy::train {

struct RunConfig {
  // data
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // model
  std::string model = "seed_cnn";
  // optimizer
  std::string optimizer = "sgd";
  double lr = 0.01, momentum = 0.5, weight_decay = 0;
  bool nesterov = false;
  // training
  int64_t epochs = 50, batch_size = 128;
  uint64_t seed = 2;  // arbitrary; docs/benchmarks.md shows the spread over seeds
  int threads = 0;    // 0 = all cores
  // callbacks
  std::optional<EarlyStoppingOptions> early_stopping;
  bool terminate_on_nan = true;
  // output
  std::string out_dir;            // empty: write nothing
  std::string progress = "auto";  // auto (bar on a terminal), bar, lines, quiet
};

// Parses JSON, or YAML when the file name ends in .yaml/.yml.
RunConfig load_run_config(const std::string& path);
RunConfig parse_run_config(const std::string& text, const std::string& where, bool yaml);
std::string run_config_json(const RunConfig& config);
// Range checks shared by files and flags (epochs >= 1, lr > 0, ...).
void validate(const RunConfig& config);

}  // namespace convoy::train
