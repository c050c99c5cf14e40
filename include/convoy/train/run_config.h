#pragma once
// A run described as data: what `convoy train` does, from a JSON or YAML file
// (configs/*.yaml), from flags, or both (flags override the file). Every key
// is checked: an unknown key or a wrong type is a UserError naming the key and
// the file.
#include <cstdint>
#include <optional>
#include <string>

#include "convoy/optim/optimizer.h"
#include "convoy/train/callbacks.h"
#include "convoy/train/schedules.h"

namespace convoy::train {

struct RunConfig {
  // data
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // model
  std::string model = "seed_cnn";
  // optimizer (see optim/optimizer.h for each one's formula)
  std::string optimizer = "sgd";
  double lr = 0.01, momentum = 0.5, weight_decay = 0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, alpha = 0.99;
  double clip_norm = 0;  // > 0: clip the gradients' global norm
  // learning-rate schedule, applied at each epoch's start
  ScheduleOptions schedule;
  // training
  int64_t epochs = 50, batch_size = 128;
  int64_t steps_per_execution = 1;
  uint64_t seed = 2;  // arbitrary; docs/benchmarks.md shows the spread over seeds
  int threads = 0;    // 0 = all cores
  // callbacks
  std::optional<EarlyStoppingOptions> early_stopping;
  std::optional<ReduceLrOptions> reduce_lr_on_plateau;
  bool terminate_on_nan = true;
  // data parallelism (docs/distributed.md; dist/strategy.h)
  std::string strategy = "single";  // single, mpi (one replica per process under mpirun)
  bool scale_lr = false;            // every learning rate x replicas, as the seed article
  bool sync_batch_norm = false;     // BN statistics over all replicas' batches (default: per replica)
  double dist_timeout = 60;         // seconds a replica waits in a collective before it stops
  int64_t bucket_kib = 0;           // gradient buckets sent during backward; 0: one allreduce after it
  // output
  std::string out_dir;            // empty: write nothing
  std::string progress = "auto";  // auto (bar on a terminal), bar, lines, quiet
  bool profile = false;           // print a per-layer profile of the training steps at the end
};

// Parses JSON, or YAML when the file name ends in .yaml/.yml.
RunConfig load_run_config(const std::string& path);
RunConfig parse_run_config(const std::string& text, const std::string& where, bool yaml);
std::string run_config_json(const RunConfig& config);
// Range checks shared by files and flags (epochs >= 1, lr > 0, ...).
void validate(const RunConfig& config);
optim::OptimizerOptions optimizer_options(const RunConfig& config);

}  // namespace convoy::train
