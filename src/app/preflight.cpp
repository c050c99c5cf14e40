// Checks before the first step of a run (preflight.h).
#include "app/preflight.h"

#include <unistd.h>

#include <filesystem>

#include "convoy/core/error.h"
#include "convoy/core/memory.h"
#include "convoy/optim/optimizer.h"
#include "convoy/core/path_kind.h"
#include "convoy/core/untrusted.h"
#include "convoy/config/data_defaults.h"
#include "convoy/io/pretrained.h"
#include "config/transfer.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

// The folder, or when it does not exist yet the nearest folder it would be made in, takes new files.
void check_output_folder(const std::string& out) {
  if (out.empty()) return;
  std::error_code ec;
  fs::path p = fs::absolute(out, ec);
  while (!p.empty() && !fs::exists(p, ec) && p != p.parent_path()) p = p.parent_path();
  require(fs::is_directory(p, ec), "output.dir (--out) " + shown(out) + ": " + p.string() +
                                       " is a file, not a folder; pick another --out");
  require(::access(p.c_str(), W_OK | X_OK) == 0,
          "output.dir (--out) " + shown(out) + ": cannot write in " + p.string() + "; pick a folder you can write to");
}

void check_pretrained(const RunConfig& c) {
  require_pretrained_file(c);
  nn::Model model = build_model(c, model_input_shape(c), model_classes(c));
  set_phase_layers(model, c, /*frozen=*/c.freeze_epochs > 0);  // model.head names one of its layers
  if (!c.compare_with_scratch) return;  // the run itself loads it before its first step
  io::FlatWeights w{model.initial_parameters(c.seed), model.initial_state()};
  io::load_pytorch_weights(model, c.pretrained, w, {.skip_prefixes = {head_of(model, c) + "."}});
}

}  // namespace

void require_pretrained_file(const RunConfig& c) {
  if (c.pretrained.empty()) return;
  const std::string kind = path_kind(c.pretrained);
  require(kind == "a file",
          "model.pretrained: " + shown(c.pretrained, 160) +
              (kind == "missing" ? std::string(" is missing") : " is " + kind + ", not a weights file") +
              "; for the EfficientNet-Lite0 weights run bash tools/fetch_pretrained.sh, else fix the path "
              "(a config's paths are relative to its folder)");
}

TrainingMemory training_memory(const nn::Model& model, const optim::OptimizerOptions& optimizer) {
  // In floating point, a lower bound: per parameter its initial value (the
  // host's copy the backend is loaded from), the backend's value and its
  // gradient; the optimizer's state for the trainable ones only (a frozen
  // layer keeps none), and with some layers frozen the packed copies of the
  // trainable values and gradients the step gathers (Program::plan_memory's
  // regions); the state (batch norms' running statistics) twice, as it is
  // kept from before the step. Measured peaks are ~1.2 values more (a
  // 1.5e8-parameter dense layer, 2026-12-03, session 18).
  const auto trainable = static_cast<double>(model.num_trainable_parameters());
  const double state = static_cast<double>(optim::state_size(optimizer, model.num_trainable_parameters()));
  const double state_per_trainable = trainable > 0 ? state / trainable : 0.0;
  const double packed_per_trainable = model.num_trainable_parameters() < model.num_parameters() ? 2.0 : 0.0;
  double floats = 2.0 * static_cast<double>(model.num_state()) + nn::activation_floats(model);
  double largest = -1;
  TrainingMemory m;
  for (const auto& plan : model.layers()) {
    double weights = 0;
    std::string what;
    for (const auto& slot : plan.params) {
      weights += (3.0 + (plan.trainable ? state_per_trainable + packed_per_trainable : 0.0)) * static_cast<double>(slot.size());
      what += slot.name.substr(plan.name.size() + 1) + " " + to_string(slot.shape) + ", ";
    }
    floats += weights;
    const double own = weights + nn::activation_floats(plan);
    if (own > largest) {
      largest = own;
      m.largest = plan.name + " (" + human_bytes(static_cast<int64_t>(own * sizeof(float))) + ": " + what + "output " +
                  to_string(plan.output_shape) + ")";
    }
  }
  m.bytes = floats * sizeof(float);
  return m;
}

void require_memory_for_model(const nn::Model& model, const RunConfig& c) {
  // Each phase trains its own layers (transfer learning's head alone, then
  // all but pretrained batch norms): the one that needs the most counts.
  TrainingMemory m;
  for (const Phase& phase : phases_of(c)) {
    nn::Model as_trained = model;
    if (!c.pretrained.empty() || c.freeze_epochs > 0) set_phase_layers(as_trained, c, phase.frozen);
    const TrainingMemory p = training_memory(as_trained, optimizer_options(c));
    if (p.bytes > m.bytes) m = p;
  }
  const int64_t available = available_memory_bytes();
  if (available < 0 || m.bytes <= static_cast<double>(available)) return;
  throw UserError("the model needs at least " + human_bytes(static_cast<int64_t>(m.bytes)) +
                  " to train, even one example at a time, but only " + human_bytes(available) +
                  " of memory is available; the most is " + m.largest + "; use fewer filters or units, or smaller images");
}

void check_before_training(const RunConfig& c) {
  validate(c);
  if (c.data.reads_images())  // the IDX reader names Debian's package when the files are missing
    require_data_folder(c.data_dir, "data.dir (--data) ");
  // Checked here, not with the keys: the data's kind may be found only after they are read (--data DIR).
  require(c.data.class_weight.empty() || c.data.reads_images(),
          "data.class_weight: weights the image workflow's classes (csv, folders, tfrecord); Fashion-MNIST's IDX data "
          "is balanced");
  if (!c.pretrained.empty()) check_pretrained(c);
  check_output_folder(c.out_dir);
  if (c.out_dir.empty()) return;
  require_output_placed(c.out_dir, c.data_dir, c.data.kind == "folders", "output.dir (--out)", "--out runs/first");
}

}  // namespace convoy::train
