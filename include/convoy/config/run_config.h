#pragma once
// A run described as data: what `convoy train` does, from a JSON or YAML file
// (configs/*.yaml), from flags, or both (flags override the file). Every key
// is checked: an unknown key or a wrong type is a UserError naming the key and
// the file.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/image/augment.h"
#include "convoy/image/codec.h"
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

// Where images come from beyond Fashion-MNIST's IDX files, and how the input
// pipeline prepares them (docs/workflow.md). Paths are relative to data.dir.
struct DataConfig {
  std::string kind = "idx";  // idx (Fashion-MNIST IDX files in dir), csv, folders, tfrecord
  // csv: a manifest with an id column and one 0/1 column per class (or one
  // label_column of class names); images at dir/images/<id><extension>.
  std::string train_csv = "train.csv";
  std::string test_csv;  // unlabeled ids to predict into submission.csv; empty: none
  std::string images = "images", id_column = "image_id", label_column, extension = ".jpg";
  // tfrecord: a glob of tf.train.Example files (plain or gzip), and of test files
  std::string files;
  // Class names in label order; empty: found in the data (a run records them
  // in its checkpoints, so evaluate/predict/resume see the same order).
  std::vector<std::string> classes;
  int64_t width = 128, height = 128, channels = 3;
  std::string resize = "area";   // area (antialiased) or bilinear
  std::string fit = "stretch";   // stretch (tf.image.resize) or cover (keep aspect, center crop)
  double validation_split = 0.2; // stratified by class, drawn by training.seed
  std::string cache = "memory";  // memory (decode once) or none (decode every epoch)
  int64_t shuffle_buffer = 0;    // 0: the whole training split
  bool oversample = false;       // repeat the training split's rarer classes up to the largest's count (csv, folders)
  // Weights of each class's examples in the training loss (Keras's
  // class_weight): "balanced" (n / (classes x the class's count) over the
  // training split) or, with class_weights, a weight per class name (others 1).
  std::string class_weight;  // "", "balanced" or "map" (class_weights)
  std::map<std::string, double> class_weights;
  std::vector<double> mean = {0.0}, std = {1.0};  // per channel (or one), on pixels scaled to [0, 1]
  image::AugmentOptions augment;  // training split only, after the cache
  std::string on_bad_example = "fail";  // fail or skip (count and name them)
  int64_t max_image_bytes = static_cast<int64_t>(image::kDefaultMaxImageBytes);  // per encoded image, checked before reading
  bool reads_images() const { return kind != "idx"; }
};

struct RunConfig {
  // data
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  DataConfig data;
  // model: a zoo name, or (when `layers` is not empty) the layers themselves
  std::string model = "seed_cnn";
  std::vector<LayerSpec> layers;
  // transfer learning (docs/transfer.md)
  std::string pretrained;  // model.pretrained: a PyTorch state dict (safetensors) for every layer but the head
  std::string head;        // model.head: the layer(s) replaced and trained from the start; empty: the last with parameters
  int64_t freeze_epochs = 0;          // transfer.freeze_epochs: the first epochs train the head alone
  double fine_tune_lr = 0;            // transfer.fine_tune_lr: the rate once every layer trains (0: optimizer.lr)
  bool compare_with_scratch = false;  // transfer.compare_with_scratch: also train from random weights, report both
  bool fine_tune_batch_norm = false;  // transfer.fine_tune_batch_norm: pretrained batch norms train too (default: frozen)
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
  // Data-parallel replicas inside one PJRT program (--device pjrt, tpu,
  // pjrt-gpu): each global batch is batch_size x replicas, split over that
  // many devices; gradients averaged in the program (docs/accelerators.md).
  int64_t replicas = 1;
  int64_t checkpoint_every_steps = 0;  // > 0: also checkpoint every N steps within an epoch (needs an output dir)
  uint64_t seed = 2;  // arbitrary; docs/benchmarks.md shows the spread over seeds
  int threads = 0;    // 0 = all cores
  std::string device = "auto";  // auto (a usable GPU, else the CPU), cpu or cuda
  // CPU: the algorithm of 3x3 stride-1 convolutions, auto | direct | winograd
  // (backends/executable.h's ConvAlgo); it changes the result's bits, so
  // checkpoints and summary.json record it.
  std::string conv_algo = "auto";
  // CPU: how a step uses the threads, auto | per_op | batch_slices
  // (backends/executable.h's Parallelism); slices change the bits, so
  // checkpoints keep it and summary.json records what ran.
  std::string parallelism = "auto";
  // fp32 | bf16: what convolutions and dense layers multiply in (backends/executable.h's
  // Precision); bf16 needs a CPU with AVX512-BF16. Checkpoints and summary.json record it.
  std::string precision = "fp32";
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
  int64_t bucket_kib = 16;          // gradient buckets sent during backward; 0: one allreduce after it
  // output
  std::string out_dir;            // empty: write nothing
  bool overwrite = false;         // a new run may replace an earlier run's outputs in out_dir
  std::string progress = "auto";  // auto (bar on a terminal), bar, lines, quiet
  bool profile = false;           // print a per-layer profile of the training steps at the end
};

// Parses JSON, or YAML when the file name ends in .yaml/.yml. Relative paths
// in the file (data.dir, model.pretrained, output.dir) are relative to the
// file's folder.
RunConfig load_run_config(const std::string& path);

// A config as `convoy train` assembles it: the file (none: the defaults),
// then each "key=value" of `sets` (--set optimizer.lr=3e-4): a dotted key of
// the file's layout and a value as YAML reads it (a number, true, a string,
// [0.5, 0.5]). An unknown key is one error naming the close matches; a value
// is typed like the file's. Paths given by --set stay relative to the working
// directory.
struct LoadedConfig {
  RunConfig config;
  std::set<std::string> given;  // the dotted keys the file or --set named ("optimizer.lr")
  bool has(const std::string& dotted) const { return given.count(dotted) > 0; }
};
LoadedConfig load_run_config(const std::string& path, const std::vector<std::string>& sets);
RunConfig parse_run_config(const std::string& text, const std::string& where, bool yaml);
std::string run_config_json(const RunConfig& config);
// Range checks shared by files and flags (epochs >= 1, lr > 0, ...).
void validate(const RunConfig& config);
optim::OptimizerOptions optimizer_options(const RunConfig& config);
// The model a config describes, for inputs of `input_shape`: the zoo model
// by name (its head sized to `classes`; 0 keeps the architecture's own), or
// its layer list.
nn::Model build_model(const RunConfig& config, const Shape& input_shape, int64_t classes = 0);
// The model input and class count the config's data gives: Fashion-MNIST's
// [1, 28, 28] (classes 0: the model's own) for idx, [channels, height,
// width] and data.classes for images.
Shape model_input_shape(const RunConfig& config);
int64_t model_classes(const RunConfig& config);
// The backend loss the config's loss section names.
Loss loss_kind(const RunConfig& config);

}  // namespace convoy::train
