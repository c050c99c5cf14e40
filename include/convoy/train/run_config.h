#pragma once
// A run described as data: what `convoy train` does, from a JSON or YAML file
// (configs/*.yaml), from flags, or both (flags override the file). Every key
// is checked: an unknown key or a wrong type is a UserError naming the key and
// the file.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/nn/model.h"
#include "convoy/optim/optimizer.h"
#include "convoy/train/callbacks.h"
#include "convoy/train/schedules.h"

namespace convoy::train {

// One layer of a model written out in a config: the layer and the names of
// the layers it reads ("input" for the model's input; empty: the layer
// before it, as in a Sequential list).
struct LayerSpec {
  nn::Layer layer;
  std::vector<std::string> inputs;
};

struct RunConfig {
  // data
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  // model: a zoo name, or (when `layers` is not empty) the layers themselves
  std::string model = "seed_cnn";
  std::vector<LayerSpec> layers;
  // loss: nll (the model outputs log-probabilities), categorical_crossentropy
  // (class indices or one-hot rows; from_logits picks softmax-of-logits or
  // log-probabilities), binary_crossentropy (multi-hot rows, from logits)
  std::string loss = "nll";
  bool from_logits = false;
  double label_smoothing = 0;
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
  int64_t checkpoint_every_steps = 0;  // > 0: also checkpoint every N steps within an epoch (needs an output dir)
  uint64_t seed = 2;  // arbitrary; docs/benchmarks.md shows the spread over seeds
  int threads = 0;    // 0 = all cores
  std::string device = "auto";  // auto (a usable GPU, else the CPU), cpu or cuda
  // callbacks
  std::optional<EarlyStoppingOptions> early_stopping;
  std::optional<ReduceLrOptions> reduce_lr_on_plateau;
  bool terminate_on_nan = true;
  std::string on_nan = "stop";  // a NaN/Inf loss or gradient: stop (keep the last good weights) or skip_step
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
// The model a config describes, for inputs of `input_shape`: the zoo model
// by name (its head sized to `classes`; 0 keeps the architecture's own), or
// its layer list.
nn::Model build_model(const RunConfig& config, const Shape& input_shape, int64_t classes = 0);
// The backend loss the config's loss section names.
Loss loss_kind(const RunConfig& config);

}  // namespace convoy::train
