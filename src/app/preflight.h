#pragma once
// Private to app/: what a run checks before anything trains, so that a
// mistake in the settings never costs a training run (transfer's scratch
// comparison included).
#include "convoy/config/run_config.h"
#include "convoy/nn/model.h"
#include "convoy/optim/optimizer_options.h"

namespace convoy::train {

// The config's ranges (transfer.freeze_epochs within training.epochs ...),
// model.pretrained present (and, when a scratch comparison would train
// first, its tensors matching the model), model.head a layer of the model,
// data.dir present, and the output folder (or the folder it would be made
// in) writable. Each a UserError naming the key and what to do.
void check_before_training(const RunConfig& config);

// model.pretrained, when set, is a file: else a UserError saying what it is.
void require_pretrained_file(const RunConfig& config);

// What training `model` takes at least, one example at a time: each
// parameter's host copy, backend copy and gradient, the optimizer's state of
// the trainable ones, BN statistics, one example's activations and their
// gradients (nn::activation_floats); and the layer that takes the most, with
// its size, tensors and output, for messages.
struct TrainingMemory {
  double bytes = 0;
  std::string largest;
};
TrainingMemory training_memory(const nn::Model& model, const optim::OptimizerOptions& optimizer);

// Training on the CPU: the model's parameters, their gradients, the
// optimizer's state and one example's activations and gradients fit in the
// memory the process may still allocate; else a UserError naming the size
// and the layer that takes the most (the batch's own check, in the CPU
// backend, says "use a smaller --batch-size", which cannot help here).
void require_memory_for_model(const nn::Model& model, const RunConfig& config);

}  // namespace convoy::train
