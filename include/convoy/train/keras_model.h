#pragma once
// Keras's Model workflow in C++: compile, fit, evaluate, predict, summary,
// on top of the same pieces the CLI uses (a backend Executable, fit() and its
// callbacks). For users who write
//
//   train::KerasModel model(nn::seed_cnn());
//   model.compile({.optimizer = {.kind = optim::Kind::adam, .lr = 1e-3f}, .loss = Loss::nll});
//   train::History h = model.fit(train, {.epochs = 5, .validation_data = &test,
//                                        .callbacks = {std::make_shared<train::EarlyStopping>(...)}});
//   const Metrics m = model.evaluate(test);
//   const std::vector<float> p = model.predict(test);   // [N, classes] probabilities
//
// Pipelines of batches (images decoded, augmented and batched on the fly)
// go through fit(TrainingData, ...) instead of in-memory images.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/data/labeled_images.h"
#include "convoy/nn/model.h"
#include "convoy/train/callbacks.h"
#include "convoy/train/checkpoint.h"
#include "convoy/train/fit.h"

namespace convoy::train {

struct CompileSettings {
  optim::OptimizerOptions optimizer;  // SGD with lr 0.01 unless set, as Keras's "sgd"
  Loss loss = Loss::softmax_cross_entropy;
  float label_smoothing = 0;
  int64_t batch_size = 32;  // Keras's fit default
  int64_t steps_per_execution = 1;
  uint64_t seed = 1;  // initial weights, shuffles, dropout masks
  // "auto" (a usable GPU that can run the model, else the CPU), "cpu" or "cuda".
  std::string device = "auto";
};

struct FitSettings {
  int64_t epochs = 1;
  // Validation after every epoch (val_loss, val_accuracy); nullptr: none, and
  // the history's validation columns are NaN.
  const data::LabeledImages* validation_data = nullptr;
  Callbacks callbacks;
  // 0: silent; 1: a live progress bar on a terminal, else one line per
  // epoch; 2: one line per epoch (Keras's verbose).
  int verbose = 1;
  std::ostream* out = nullptr;  // where progress goes; nullptr: std::cout
  // Training's warnings (a skipped non-finite step, a reduced learning
  // rate); nullptr: std::cerr when verbose > 0, else nowhere.
  std::ostream* warnings = nullptr;
  OnNonFinite on_nan = OnNonFinite::stop;
};

class KerasModel {
 public:
  explicit KerasModel(nn::Model model);

  // Plans the model for the settings' batch size on the settings' device
  // with fresh weights; compiling again keeps the current weights (as Keras).
  void compile(const CompileSettings& settings);
  // Epochs continue where the last fit stopped (Keras's initial_epoch), and
  // the returned history holds every epoch so far.
  History fit(const data::LabeledImages& x, const FitSettings& settings);
  History fit(const TrainingData& data, const FitSettings& settings);
  // Inference-mode mean loss and accuracy over every example.
  Metrics evaluate(const data::LabeledImages& data);
  // Class probabilities, [N, classes] row-major (softmax of logits,
  // exp of log-probabilities, per-class sigmoid for binary cross-entropy).
  std::vector<float> predict(const data::LabeledImages& data);
  // Why "auto" chose the CPU (no usable GPU, or a layer the GPU lacks); empty otherwise.
  const std::string& device_note() const { return device_note_; }
  // Keras's save_weights / load_weights: the weights and batch-norm
  // statistics as safetensors under PyTorch's names — the file
  // `convoy train --out DIR` writes as DIR/model.safetensors, so either side
  // reads the other's. load_weights needs this model's architecture (a
  // missing or mis-shaped tensor is a UserError naming it); before compile()
  // the weights wait for it.
  void save_weights(const std::string& path);
  void load_weights(const std::string& path);
  // Continues from a checkpoint of this model (train/checkpoint.h), after
  // compile(): its weights, batch-norm statistics, learning rate and history,
  // and its optimizer state when that covers this model's parameters (a
  // transfer run's last phase keeps its pretrained batch norms frozen, so its
  // state covers fewer: the optimizer then starts afresh, as Keras's compile()
  // does). To save and load whole models as `convoy train --out` folders, see
  // save_model and load_model (app/model_files.h).
  void restore(const Checkpoint& checkpoint);
  // Keras-style table: layers, output shapes, parameter counts.
  std::string summary() const { return model_.summary(); }

  const nn::Model& model() const { return model_; }
  const CompileSettings& compile_settings() const { return settings_; }  // the last compile()'s
  const History& history() const { return history_; }
  // The compiled executable (weights, learning rate); throws before compile().
  Executable& executable();

 private:
  nn::Model model_;
  CompileSettings settings_;
  std::unique_ptr<Executable> exe_;
  History history_;
  std::string device_note_;
  std::vector<float> loaded_params_, loaded_state_;  // load_weights before compile()
};

}  // namespace convoy::train
