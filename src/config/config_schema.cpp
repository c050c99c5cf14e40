// The run-config keys, each declared once (config_schema.h). To add a key:
// add its RunConfig member (the default is its initialiser) and one entry to
// the table in config_schema(); files, --set, the flag, --help, summary.json,
// validate() and the README table (`convoy help config --markdown`) follow.
#include "convoy/config/config_schema.h"

#include <cfloat>

#include "config/config_json.h"
#include "config/config_keys.h"

namespace convoy::train {

const std::vector<ConfigKey>& config_schema() {
  static const std::vector<ConfigKey> keys = [] {
    std::vector<ConfigKey> k;
    const auto images = [](ConfigKey key) {
      key.images_only = true;
      return key;
    };
    // ---- data ----
    k.push_back(path("data.dir", AT(data_dir), {},
                     "Data folder: class folders of images, a Kaggle CSV + images/, or Fashion-MNIST IDX files")
                    .with_flag("--data")
                    .with_details("Fashion-MNIST's four IDX files (raw or `.gz`), a folder of class folders of photos "
                                  "(`DIR/<class>/*.jpg`), a Kaggle CSV (`DIR/train.csv` + `DIR/images/`) or TFRecord "
                                  "shards; without a config, photos get an input size from the first image (longer "
                                  "side at most 128), `plant_cnn`, categorical cross-entropy from logits, adam lr "
                                  "0.001 and a batch that fits, said in the first line; anything else is one error "
                                  "naming the kinds it reads"));
    k.push_back(images(text("data.kind", AT(data.kind), choices({"idx", "csv", "folders", "tfrecord"}),
                            "What data.dir holds: idx (Fashion-MNIST), csv, folders (one per class) or tfrecord")
                           .with_default("idx (without a config: found in the data)")
                           .checked_always()));
    k.push_back(images(text("data.train_csv", AT(data.train_csv), {}, "csv: the manifest of labelled images, relative to data.dir")));
    k.push_back(images(text("data.test_csv", AT(data.test_csv), {},
                            "csv: unlabeled ids to predict into submission.csv; empty: none")));
    k.push_back(images(text("data.images", AT(data.images), {}, "csv: the image folder, relative to data.dir")));
    k.push_back(images(text("data.id_column", AT(data.id_column), {}, "csv: the column of image ids")));
    k.push_back(images(text("data.label_column", AT(data.label_column), {},
                            "csv: a column of class names; empty: one 0/1 column per class")));
    k.push_back(images(text("data.extension", AT(data.extension), {}, "csv: appended to an id to name its image")));
    k.push_back(images(text("data.files", AT(data.files), {},
                            "tfrecord: a glob of tf.train.Example files (plain or gzip), e.g. shards/*.tfrecord")));
    ConfigKey classes = images(texts("data.classes", AT(data.classes), "Class names in label order; empty: found in the data"));
    classes.check = [](const RunConfig& c) {  // a name a folder, a CSV column and a report can hold
      for (const std::string& name : c.data.classes) require_class_name(name, "data.classes", "fix the list");
    };
    k.push_back(std::move(classes));
    k.push_back(images(whole("data.width", AT(data.width), range(8, 4096), "Input width images are resized to")));
    k.push_back(images(whole("data.height", AT(data.height), range(8, 4096), "Input height images are resized to")));
    k.push_back(images(whole("data.channels", AT(data.channels), choices({"1", "3"}), "1 (gray) or 3 (RGB)")));
    k.push_back(images(text("data.resize", AT(data.resize), choices({"area", "bilinear"}),
                            "area (antialiased) or bilinear")));
    k.push_back(images(text("data.fit", AT(data.fit), choices({"stretch", "cover"}),
                            "stretch (as tf.image.resize) or cover (keep the aspect, crop the centre)")));
    k.push_back(images(number("data.validation_split", AT(data.validation_split), open_range(0, 1),
                              "Share of the labelled images held out, stratified by class, drawn by training.seed")));
    k.push_back(images(text("data.cache", AT(data.cache), choices({"memory", "none"}),
                            "memory (decode once) or none (decode every epoch)")));
    k.push_back(images(whole("data.shuffle_buffer", AT(data.shuffle_buffer), at_least(0, "0 (the whole split) or positive"),
                             "Examples shuffled together; 0: the whole training split")));
    k.push_back(images(boolean("data.oversample", AT(data.oversample),
                               "Repeat the training split's rarer classes up to the largest's count (csv, folders)")
                           .with_details("In order, round and round; the validation split is left as it is")));
    k.push_back(images(class_weight_key()));
    k.push_back(images(numbers("data.mean", AT(data.mean), "Per channel (or one), on pixels scaled to [0, 1]")));
    k.push_back(images(numbers("data.std", AT(data.std), "Per channel (or one), each positive")));
    k.push_back(images(text("data.on_bad_example", AT(data.on_bad_example), choices({"fail", "skip"}),
                            "A missing or corrupt image or bad CSV row: fail, or skip (count and name them)")));
    k.push_back(images(whole("data.max_image_bytes", AT(data.max_image_bytes), at_least(1, "positive"),
                             "Largest encoded image read, checked before reading")
                           .with_details("A larger file is a bad example, refused before it is read (64 MiB)")));
    // data.augment: the training split only, after the cache (docs/images.md).
    k.push_back(images(boolean("data.augment.horizontal_flip", AT(data.augment.horizontal_flip),
                               "Flip left-right with probability 1/2")));
    k.push_back(images(boolean("data.augment.vertical_flip", AT(data.augment.vertical_flip),
                               "Flip upside down with probability 1/2")));
    k.push_back(images(number("data.augment.crop_area", AT(data.augment.crop_area), left_open(0, 1),
                              "Random crop of area in [crop_area, 1], stretched back; 1: off")));
    k.push_back(images(number("data.augment.rotation", AT(data.augment.rotation), range(0, 0.5),
                              "Rotation up to this fraction of a full turn")));
    k.push_back(images(number("data.augment.zoom", AT(data.augment.zoom), right_open(0, 1),
                              "Scale in [1 - zoom, 1 + zoom]")));
    k.push_back(images(number("data.augment.translate", AT(data.augment.translate), range(0, 1),
                              "Shift up to this fraction of the width and height")));
    k.push_back(images(fill_mode_key()));
    k.push_back(images(whole("data.augment.fill_value", AT(data.augment.fill_value), range(0, 255),
                             "Gray level of constant fill and cutout holes")));
    k.push_back(images(number("data.augment.brightness", AT(data.augment.brightness), range(0, 1),
                              "Brightness factor in [1 - b, 1 + b]")));
    k.push_back(images(number("data.augment.contrast", AT(data.augment.contrast), range(0, 1),
                              "Contrast factor in [1 - c, 1 + c]")));
    k.push_back(images(number("data.augment.saturation", AT(data.augment.saturation), range(0, 1),
                              "Saturation factor in [1 - s, 1 + s]")));
    k.push_back(images(number("data.augment.hue", AT(data.augment.hue), range(0, 0.5),
                              "Hue shift up to this fraction of the circle")));
    k.push_back(images(whole("data.augment.cutout", AT(data.augment.cutout), range(0, 64),
                             "Square holes cut in each image (Cutout)")));
    k.push_back(images(number("data.augment.cutout_size", AT(data.augment.cutout_size), left_open(0, 1),
                              "Hole side as a fraction of the shorter image side")));
    // ---- model ----
    k.push_back(model_name_key());
    k.push_back(layers_key());
    k.push_back(path("model.pretrained", AT(pretrained), {},
                     "Transfer learning: a PyTorch state dict (.safetensors) for every layer but the head")
                    .omitted_when_empty());
    k.push_back(text("model.head", AT(head), {},
                     "Transfer learning: the layer(s) replaced and trained from the start; empty: the last with "
                     "parameters")
                    .omitted_when_empty());
    // ---- transfer (docs/transfer.md) ----
    k.push_back(whole("transfer.freeze_epochs", AT(freeze_epochs), at_least(0, "between 0 and training.epochs"),
                      "Transfer learning: the first epochs train the head alone")
                    .with_flag("--freeze-epochs"));
    k.push_back(float_number("transfer.fine_tune_lr", AT(fine_tune_lr), at_least(0, "0 (optimizer.lr) or positive"),
                       "The rate once every layer trains; 0: optimizer.lr"));
    k.push_back(boolean("transfer.compare_with_scratch", AT(compare_with_scratch),
                        "Also train from random weights and report both"));
    k.push_back(boolean("transfer.fine_tune_batch_norm", AT(fine_tune_batch_norm),
                        "Pretrained batch norms train too (default: frozen)"));
    // ---- loss ----
    k.push_back(loss_name_key());
    k.push_back(boolean("loss.from_logits", AT(from_logits),
                        "The model outputs logits (softmax or sigmoid fused into the loss), not log-probabilities"));
    k.push_back(number("loss.label_smoothing", AT(label_smoothing), right_open(0, 1), "Keras's label smoothing"));
    // ---- optimizer (optim/optimizer.h has each one's formula) ----
    k.push_back(text("optimizer.name", AT(optimizer), choices({"sgd", "adam", "adamw", "rmsprop"}),
                     "The optimizer, with PyTorch's update rules")
                    .with_flag("--optimizer")
                    .with_default("sgd (photos: adam)"));
    k.push_back(float_number("optimizer.lr", AT(lr), left_open(0, FLT_MAX, "positive and finite (at most 3.4e38, a float)"),
                       "Learning rate, for any optimizer")
                    .with_flag("--lr")
                    .with_default("0.01 (photos: 0.001)"));
    k.push_back(float_number("optimizer.momentum", AT(momentum), right_open(0, 1),
                       "Momentum of sgd and rmsprop (PyTorch's); adam has none: --momentum with it is an error")
                    .with_flag("--momentum"));
    k.push_back(float_number("optimizer.weight_decay", AT(weight_decay), at_least(0), "L2 penalty (adamw: decoupled)"));
    k.push_back(boolean("optimizer.nesterov", AT(nesterov), "sgd: Nesterov momentum"));
    k.push_back(float_number("optimizer.beta1", AT(beta1), right_open(0, 1), "adam, adamw: first-moment decay"));
    k.push_back(float_number("optimizer.beta2", AT(beta2), right_open(0, 1), "adam, adamw: second-moment decay"));
    // At most 1: eps is added to sqrt(v), which is far below 1 for gradients a
    // network has; a larger eps swamps it, so the step shrinks to lr * g / eps
    // and a run with eps 1e300 trained nothing and said nothing.
    k.push_back(float_number("optimizer.eps", AT(eps), left_open(0, 1, "above 0 and at most 1 (a larger eps drowns the gradients' scale)"),
                       "adam, adamw, rmsprop: added to the denominator"));
    k.push_back(float_number("optimizer.alpha", AT(alpha), right_open(0, 1), "rmsprop: smoothing of the squared gradients"));
    k.push_back(float_number("optimizer.clip_norm", AT(clip_norm), at_least(0, "0 (off) or positive"),
                       "Clip the gradients' global norm to this; 0: off"));
    // ---- schedule: the rate at each epoch's start ----
    k.push_back(text("schedule.kind", AT(schedule.kind), choices({"constant", "step", "cosine", "one_cycle"}),
                     "constant; step (x gamma every step_epochs); cosine (down to min_lr); one_cycle (up to max_lr "
                     "over 30% of the epochs, then cosine down)"));
    k.push_back(whole("schedule.step_epochs", AT(schedule.step_epochs), at_least(1), "step: epochs between decays"));
    k.push_back(float_number("schedule.gamma", AT(schedule.gamma), above(0), "step: the factor of each decay"));
    k.push_back(float_number("schedule.min_lr", AT(schedule.min_lr), at_least(0), "cosine, one_cycle: the last rate"));
    k.push_back(float_number("schedule.max_lr", AT(schedule.max_lr), above(0), "one_cycle: the peak rate"));
    k.push_back(whole("schedule.warmup_epochs", AT(schedule.warmup_epochs), at_least(0),
                      "Ramp the rate up linearly over the first epochs"));
    // ---- training ----
    k.push_back(whole("training.epochs", AT(epochs), at_least(1), "Training epochs").with_flag("--epochs"));
    k.push_back(whole("training.batch_size", AT(batch_size), at_least(1), "Examples per step")
                    .with_flag("--batch-size")
                    .with_default("128 (photos: 32, less for a small data set)"));
    k.push_back(whole("training.steps_per_execution", AT(steps_per_execution), range(1, 1024),
                      "Steps run per call into the backend (Keras's steps_per_execution)"));
    k.push_back(whole("training.replicas", AT(replicas), at_least(1),
                      "With --device pjrt, tpu or pjrt-gpu: data-parallel replicas inside one compiled program, each "
                      "on its own device with its own batch_size batch, gradients all-reduced in the step (the seed's 8 "
                      "TPU cores); XLA's CPU plugin makes that many devices. See [docs/accelerators.md](docs/accelerators.md)")
                    .with_flag("--replicas"));
    k.push_back(whole("training.checkpoint_every_steps", AT(checkpoint_every_steps), at_least(0, "0 (off) or positive"),
                      "Also checkpoint every N steps within an epoch (needs --out); 0: off")
                    .with_flag("--checkpoint-every-steps"));
    k.push_back(whole("training.seed", AT(seed), {.note = "0 or more"}, "Seed for initialisation and shuffling; same seed and threads, same bits")
                    .with_flag("--seed"));
    k.push_back(whole("training.threads", AT(threads), at_least(0, "0 (all cores) or positive"),
                      "Worker threads; 0: all cores")
                    .with_flag("--threads"));
    k.push_back(device_key());
    k.push_back(conv_algo_key());
    k.push_back(text("training.precision", AT(precision), choices({"fp32", "bf16"}),
                     "What convolutions and dense layers multiply in: fp32, or bf16 (bfloat16 inputs and weights, "
                     "fp32 sums, fp32 master weights and optimizer state, everything else fp32) on CPUs with "
                     "AVX512-BF16 only; elsewhere, and on cuda and PJRT devices, one line and exit 2. Same accuracy, "
                     "faster than fp32 on AMX CPUs, where the convolution passes AMX wins run on it (ResNet-18 ~16%), "
                     "slower without AMX (docs/benchmarks.md). Checkpoints keep it; a resume keeps it")
                    .with_flag("--precision"));
    k.push_back(text("training.parallelism", AT(parallelism), choices({"auto", "per_op", "batch_slices"}),
                     "CPU: how a step uses the threads: per_op splits every op across them; batch_slices gives each "
                     "thread its own slice of the batch through the whole step, gradients summed once per step in "
                     "slice order; auto slices when threads > 1 and every layer is small (docs/architecture.md). It "
                     "changes the result's bits, so checkpoints keep it and summary.json records what ran"));
    // ---- callbacks ----
    k.push_back(boolean("callbacks.terminate_on_nan", AT(terminate_on_nan), "Stop on a NaN/Inf loss (Keras's TerminateOnNaN)"));
    k.push_back(text("callbacks.on_nan", AT(on_nan), choices({"stop", "skip_step"}),
                     "NaN/Inf in a loss or gradient: stop (keep the last good weights, exit 2) or skip_step (drop "
                     "that update, count it)")
                    .with_flag("--on-nan"));
    k.push_back(early_stopping_key());
    k.push_back(reduce_lr_key());
    // ---- distributed (docs/distributed.md) ----
    k.push_back(text("distributed.strategy", AT(strategy), choices({"single", "mpi", "nccl"}),
                     "single; mpi: one replica per process under mpirun; nccl: one per GPU under mpirun")
                    .with_flag("--strategy")
                    .with_details("Replicas train data-parallel: per-replica shards of every epoch, averaged gradients, "
                                  "only rank 0 prints and writes; nccl averages on the GPUs (compiled, not yet run on a "
                                  "GPU)")
                    .run_setting());
    k.push_back(boolean("distributed.scale_lr", AT(scale_lr), "Multiply the learning rate by the number of replicas")
                    .with_flag("--scale-lr"));
    k.push_back(boolean("distributed.sync_batch_norm", AT(sync_batch_norm),
                        "Batch-norm statistics over all replicas' batches (default: per replica)")
                    .with_flag("--sync-bn"));
    k.push_back(number("distributed.timeout_seconds", AT(dist_timeout), above(0),
                       "Seconds a replica waits for the others before it stops with an error")
                    .with_flag("--dist-timeout")
                    .run_setting());
    k.push_back(whole("distributed.bucket_kib", AT(bucket_kib), at_least(0, "0 (off) or positive"),
                      "Send gradients in buckets of this many KiB during backward; 0: all after it")
                    .with_flag("--dist-bucket-kib")
                    .run_setting());
    // ---- output ----
    k.push_back(path("output.dir", AT(out_dir), {}, "Folder for checkpoint, history.csv, summary.json, model.safetensors")
                    .with_flag("--out")
                    .with_default("none: write nothing")
                    .with_details("Writes `checkpoint.safetensors` (its predecessor kept as "
                                  "`checkpoint.prev.safetensors`) and `history.csv` after every epoch; at the end "
                                  "`summary.json`, `model.safetensors`, `curves.png`, `predictions.png` (the seed's 5x5 "
                                  "actual/predicted grid), `confusion.png` and `report.html`; `best.safetensors` (the "
                                  "best epoch by validation loss); TensorBoard event files in "
                                  "`DIR/tensorboard/{train,validation}`"));
    k.push_back(boolean("output.overwrite", AT(overwrite),
                        "A new run may replace an earlier run's outputs in output.dir; other files there are never "
                        "touched")
                    .with_flag("--overwrite")
                    .with_details("Without it a new run refuses a folder that holds any of the names a run writes "
                                  "(but `history.csv` and `tensorboard/`), naming them; a resume continues its own "
                                  "run and needs none"));
    k.push_back(text("output.progress", AT(progress), choices({"auto", "bar", "lines", "quiet"}),
                     "auto (a bar on a terminal), bar (Keras-style, live), lines (one per epoch) or quiet")
                    .with_flag("--progress")
                    .run_setting());
    k.push_back(boolean("output.profile", AT(profile), "Print per-layer forward/backward time and GFLOP/s at the end")
                    .with_flag("--profile")
                    .run_setting());
    return k;
  }();
  return keys;
}

const ConfigKey* find_config_key(const std::string& dotted) {
  for (const auto& k : config_schema())
    if (k.name == dotted) return &k;
  return nullptr;
}

bool is_config_section(const std::string& dotted) {
  for (const auto& k : config_schema())
    if (k.name.size() > dotted.size() && k.name.starts_with(dotted) && k.name[dotted.size()] == '.') return true;
  return false;
}

std::set<std::string> config_children(const std::string& section) {
  std::set<std::string> out;
  const std::string prefix = section.empty() ? "" : section + ".";
  for (const auto& k : config_schema()) {
    if (!k.name.starts_with(prefix)) continue;
    const std::string rest = k.name.substr(prefix.size());
    out.insert(rest.substr(0, rest.find('.')));
  }
  return out;
}

nlohmann::json config_value_from_text(const ConfigKey& key, const std::string& text, const std::string& where) {
  if (key.type == KeyType::text || key.type == KeyType::path) return text;
  return config_text_to_json("v: " + (text.empty() ? std::string("''") : text), where, /*yaml=*/true)["v"];
}

}  // namespace convoy::train
