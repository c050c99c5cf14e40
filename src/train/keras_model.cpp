#include "convoy/train/keras_model.h"

#include <unistd.h>

#include <iostream>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/io/model_weights.h"
#include "convoy/io/safetensors.h"
#include "convoy/train/evaluation.h"

namespace convoy::train {
namespace {

// An input-shaped set of zero examples: validation when there is none.
data::LabeledImages no_examples(const Shape& example_shape) {
  Shape images{0};
  images.insert(images.end(), example_shape.begin(), example_shape.end());
  return {Tensor(DType::f32, images), Tensor(DType::i32, {0})};
}

}  // namespace

KerasModel::KerasModel(nn::Model model) : model_(std::move(model)) {}

void KerasModel::compile(const CompileSettings& settings) {
  require(settings.steps_per_execution >= 1, "compile: steps_per_execution must be at least 1");
  std::vector<float> weights, state;
  if (exe_) {
    weights.resize(static_cast<std::size_t>(model_.num_parameters()));
    state.resize(static_cast<std::size_t>(model_.num_state()));
    exe_->internals().read(Held::parameters, weights);
    exe_->internals().read(Held::state, state);
  }
  CompileOptions options;
  options.batch_size = settings.batch_size;
  options.loss = settings.loss;
  options.label_smoothing = settings.label_smoothing;
  options.optimizer = settings.optimizer;
  options.steps_per_execution = settings.steps_per_execution;
  const DeviceChoice device = choose_device(settings.device, model_);
  device_note_ = device.fallback;
  exe_ = compile_on(device, model_, options, settings.seed);
  if (!loaded_params_.empty()) {  // load_weights came before the first compile
    weights = std::move(loaded_params_);
    state = std::move(loaded_state_);
    loaded_params_.clear();
    loaded_state_.clear();
  }
  if (!weights.empty()) {
    exe_->internals().write(Held::parameters, weights);
    exe_->internals().write(Held::state, state);
  }
  settings_ = settings;
}

void KerasModel::save_weights(const std::string& path) {
  std::vector<float> params(static_cast<std::size_t>(model_.num_parameters()));
  std::vector<float> state(static_cast<std::size_t>(model_.num_state()));
  if (exe_) {
    exe_->internals().read(Held::parameters, params);
    exe_->internals().read(Held::state, state);
  } else if (!loaded_params_.empty()) {
    params = loaded_params_;
    state = loaded_state_;
  } else {
    throw UserError("save_weights: the model has no weights yet; call compile() or load_weights() first");
  }
  io::write_safetensors(path, io::to_named(model_, params, state));
}

void KerasModel::load_weights(const std::string& path) {
  io::FlatWeights w = io::from_named(model_, io::read_safetensors(path), path);
  if (!exe_) {
    loaded_params_ = std::move(w.params);
    loaded_state_ = std::move(w.state);
    return;
  }
  exe_->internals().write(Held::parameters, w.params);
  exe_->internals().write(Held::state, w.state);
}

void KerasModel::restore(const Checkpoint& checkpoint) {
  Executable& exe = executable();
  exe.internals().write(Held::parameters, checkpoint.params);
  exe.internals().write(Held::state, checkpoint.state);
  if (static_cast<int64_t>(checkpoint.optimizer_state.size()) == exe.internals().size(Held::optimizer_state))
    exe.internals().write(Held::optimizer_state, checkpoint.optimizer_state);
  exe.set_learning_rate(checkpoint.lr);
  history_ = checkpoint.history;
}

Executable& KerasModel::executable() {
  require(exe_ != nullptr, "call compile() before fit, evaluate or predict");
  return *exe_;
}

History KerasModel::fit(const data::LabeledImages& x, const FitSettings& settings) {
  const data::LabeledImages empty = no_examples(x.example_shape());
  const data::LabeledImages& validation = settings.validation_data ? *settings.validation_data : empty;
  const bool steps_on_host = executable().compiled_for().device == "cpu";
  return fit(in_memory(x, validation, settings_.batch_size, settings_.seed, nullptr, steps_on_host), settings);
}

History KerasModel::fit(const TrainingData& data, const FitSettings& settings) {
  Executable& exe = executable();
  FitOptions options;
  options.epochs = static_cast<int64_t>(history_.epochs.size()) + settings.epochs;
  options.initial_epoch = static_cast<int64_t>(history_.epochs.size());
  options.seed = settings_.seed;
  options.on_nan = settings.on_nan;
  options.steps_per_execution = settings_.steps_per_execution;
  options.warnings = settings.warnings ? settings.warnings : settings.verbose > 0 ? &std::cerr : nullptr;
  if (settings.verbose > 0) {
    std::ostream& out = settings.out ? *settings.out : std::cout;
    const bool live_bar = settings.verbose == 1 && &out == &std::cout && isatty(STDOUT_FILENO);
    options.callbacks.push_back(std::make_shared<ProgressLogger>(out, live_bar));
  }
  options.callbacks.insert(options.callbacks.end(), settings.callbacks.begin(), settings.callbacks.end());
  history_ = train::fit(exe, data, options, std::move(history_));
  return history_;
}

Metrics KerasModel::evaluate(const data::LabeledImages& data) { return train::evaluate(executable(), data); }

std::vector<float> KerasModel::predict(const data::LabeledImages& data) {
  Executable& exe = executable();
  const int64_t classes = exe.compiled_for().output_size;
  std::vector<float> out(static_cast<std::size_t>(data.size() * classes));
  for_each_output(exe, data, [&](int64_t i, const float* row) {
    output_probabilities(settings_.loss, row, classes, out.data() + i * classes);
  });
  return out;
}

}  // namespace convoy::train
