// save_model and load_model (model_files.h): a KerasModel as a folder in the
// layout `convoy train --out DIR` writes, so the CLI and the library read
// each other's.
#include "convoy/app/model_files.h"

#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "convoy/app/run_checkpoint.h"
#include "convoy/core/error.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/nn/zoo.h"
#include "config/float_text.h"
#include "config/layer_config.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

// What makes two models the same for a checkpoint: layer names, kinds and
// settings, inputs and shapes (so the tensors' names and sizes agree).
nlohmann::json structure(const nn::Model& m) {
  nlohmann::json out = nlohmann::json::array();
  for (const nn::LayerPlan& p : m.layers()) {
    const nlohmann::json layer = layers_to_json({LayerSpec{.layer = p.layer, .inputs = {}}})[0];
    out.push_back({{"name", p.name}, {"layer", layer}, {"inputs", p.inputs}, {"shape", p.output_shape}});
  }
  return out;
}

// The layers as a config's model.layers list, or nothing when some layer has
// a name other than the kind_N build_model would give it (its tensors would
// then be saved under names the rebuilt model does not have).
std::optional<std::vector<LayerSpec>> as_layer_list(const nn::Model& m) {
  std::map<std::string, int> counts;
  std::vector<LayerSpec> specs;
  const auto& plans = m.layers();
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const std::string kind = nn::kind_name(plans[i].layer);
    if (plans[i].name != kind + "_" + std::to_string(counts[kind]++)) return std::nullopt;
    LayerSpec spec{.layer = plans[i].layer, .inputs = {}};
    const bool chained = plans[i].inputs.size() == 1 && plans[i].inputs[0] == static_cast<int>(i) - 1;
    if (!chained)
      for (int from : plans[i].inputs) spec.inputs.push_back(from == nn::kModelInput ? "input" : plans[from].name);
    specs.push_back(std::move(spec));
  }
  return specs;
}

// The least run config that rebuilds `m` and its compiled settings.
RunConfig config_describing(const nn::Model& m, const CompileSettings& s, int64_t epochs) {
  RunConfig c;
  const Shape& in = m.input_shape();
  const int64_t classes = m.output_shape().back();
  if (!(in == data::kFashionMnistShape && classes == 10)) {  // else the Fashion-MNIST IDX default
    require(in.size() == 3 && (in[0] == 1 || in[0] == 3),
            "save: the model's input " + to_string(in) + " is not an image of 1 or 3 channels, which a run config "
            "cannot describe; use save_weights()");
    c.data.kind = "folders";
    c.data.channels = in[0];
    c.data.height = in[1];
    c.data.width = in[2];
    for (int64_t k = 0; k < classes; ++k) c.data.classes.push_back("class_" + std::to_string(k));
  }
  const nlohmann::json want = structure(m);
  bool named = false;
  for (const std::string& name : nn::zoo_names()) {
    try {
      RunConfig zoo = c;
      zoo.model = name;
      if (structure(build_model(zoo, model_input_shape(c), model_classes(c))) == want) {
        c.model = name;
        named = true;
        break;
      }
    } catch (const UserError&) {  // a zoo model that does not take this input: not it
    }
  }
  if (!named) {
    auto layers = as_layer_list(m);
    require(layers.has_value(),
            "save: the model's layers have names of their own ('" + m.layers().front().name +
                "', ...) and it is no zoo model, so a run config cannot rebuild it; use save_weights()");
    c.model = "custom";
    c.layers = std::move(*layers);
  }
  for (const nn::LayerPlan& p : m.layers())
    require(p.trainable, "save: layer '" + p.name + "' is frozen, which a run config does not record; unfreeze it "
                         "or use save_weights()");
  c.loss = s.loss == Loss::nll ? "nll" : s.loss == Loss::softmax_cross_entropy ? "categorical_crossentropy"
                                                                               : "binary_crossentropy";
  c.from_logits = s.loss != Loss::nll;
  c.label_smoothing = as_written(s.label_smoothing);
  const optim::OptimizerOptions& o = s.optimizer;
  c.optimizer = optim::kind_name(o.kind);
  c.lr = as_written(o.lr);
  c.momentum = as_written(o.momentum);
  c.weight_decay = as_written(o.weight_decay);
  c.nesterov = o.nesterov;
  c.beta1 = as_written(o.beta1);
  c.beta2 = as_written(o.beta2);
  c.eps = as_written(o.eps);
  c.alpha = as_written(o.alpha);
  c.clip_norm = as_written(o.clip_norm);
  c.epochs = std::max<int64_t>(1, epochs);
  c.batch_size = s.batch_size;
  c.steps_per_execution = s.steps_per_execution;
  c.seed = s.seed;
  c.device = s.device;
  validate(c);
  return c;
}

}  // namespace

void save_model(KerasModel& model, const std::string& dir) {
  Executable& exe = model.executable();
  const History& history = model.history();
  const int64_t epochs = history.epochs.empty() ? 0 : history.epochs.back().epoch;
  const RunConfig c = config_describing(model.model(), model.compile_settings(), epochs);
  std::error_code ec;
  fs::create_directories(dir, ec);
  require(!ec, "save: cannot create " + dir + " (" + ec.message() + ")");
  save_checkpoint((fs::path(dir) / kCheckpointFile).string(), model.model(), exe, history,
                  {.config = run_config_json(c)});
  model.save_weights((fs::path(dir) / "model.safetensors").string());
}

KerasModel load_model(const std::string& dir) {
  const RunCheckpoint ck = load_latest_checkpoint(dir, std::cerr);
  const RunConfig& c = ck.config;
  KerasModel m(build_model(c, model_input_shape(c), model_classes(c)));
  m.compile({.optimizer = optimizer_options(c), .loss = loss_kind(c),
             .label_smoothing = static_cast<float>(c.label_smoothing), .batch_size = c.batch_size,
             .steps_per_execution = c.steps_per_execution, .seed = c.seed, .device = c.device});
  m.restore(ck);
  return m;
}

}  // namespace convoy::train
