// The keys of config_schema() that a plain member cannot describe: values
// that are mappings or lists read by their own parser, an enum written as a
// name, and names checked against a list kept elsewhere (the zoo, the
// devices, the losses).
#include <cmath>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/nn/zoo.h"
#include "config/config_keys.h"
#include "config/config_section.h"
#include "config/layer_config.h"

namespace convoy::train {
namespace {

using json = nlohmann::json;

const char* fill_mode_name(image::FillMode m) {
  switch (m) {
    case image::FillMode::constant: return "constant";
    case image::FillMode::reflect: return "reflect";
    case image::FillMode::wrap: return "wrap";
    case image::FillMode::nearest: return "nearest";
  }
  return "reflect";
}

// A key read by `read` into the config and written by `write`.
ConfigKey custom(std::string name, std::string type_shown, std::string default_shown, std::string help,
                 decltype(ConfigKey::read) read, decltype(ConfigKey::write) write) {
  ConfigKey k;
  k.name = std::move(name);
  k.type = KeyType::structure;
  k.type_shown = std::move(type_shown);
  k.default_shown = std::move(default_shown);
  k.help = std::move(help);
  k.read = std::move(read);
  k.write = std::move(write);
  return k;
}

}  // namespace

ConfigKey class_weight_key() {
  ConfigKey k = custom(
      "data.class_weight", "balanced or mapping", "none (every class 1)",
      "Weights of each class's examples in the training loss (Keras's class_weight): balanced, or {class: "
      "weight} (others 1)",
      [](const json& v, RunConfig& c, const std::string& where) {
        DataConfig& d = c.data;
        if (v.is_null()) return;
        if (v.is_string()) {
          require(v == "balanced", where + ": 'data.class_weight' must be balanced or a mapping of class names to "
                                           "weights, got " + shown_json(v));
          d.class_weight = "balanced";
          return;
        }
        const bool ok = v.is_object() && std::all_of(v.begin(), v.end(), [](const json& w) { return w.is_number(); });
        require(ok, where + ": 'data.class_weight' must be balanced or a mapping of class names to weights "
                            "({rare: 3, common: 1}), got " + shown_json(v));
        d.class_weight = "map";
        for (auto it = v.begin(); it != v.end(); ++it) d.class_weights[it.key()] = it->get<double>();
      },
      [](const RunConfig& c) -> std::optional<json> {
        const DataConfig& d = c.data;
        if (d.class_weight == "map") return json(d.class_weights);
        return d.class_weight.empty() ? json(nullptr) : json(d.class_weight);
      });
  k.details = "balanced: each class weighs examples / (classes x its count in the training split), Keras's and "
              "sklearn's formula; a mapping `{multiple_diseases: 3}` leaves the others 1. Each training example's "
              "loss and gradient are multiplied by its class's weight, said in one line at the start; validation loss "
              "and the reports stay unweighted";
  return k;
}

ConfigKey fill_mode_key() {
  ConfigKey k = custom(
      "data.augment.fill_mode", "string", "", "Pixels a rotation, zoom or shift uncovers: as Keras's fill_mode",
      [](const json& v, RunConfig& c, const std::string& where) {
        std::string name;
        read_typed(v, name, "data.augment.fill_mode", {}, where);
        for (auto m : {image::FillMode::constant, image::FillMode::reflect, image::FillMode::wrap,
                       image::FillMode::nearest})
          if (name == fill_mode_name(m)) {
            c.data.augment.fill_mode = m;
            return;
          }
        throw UserError(where + ": 'data.augment.fill_mode' must be constant, reflect, wrap or nearest, got '" +
                        shown(name) + "'");
      },
      [](const RunConfig& c) -> std::optional<json> { return fill_mode_name(c.data.augment.fill_mode); });
  k.type = KeyType::text;
  k.type_shown.clear();
  k.allowed = choices({"constant", "reflect", "wrap", "nearest"});
  return k;
}

ConfigKey model_name_key() {
  ConfigKey k = text("model.name", AT(model), {.note = "a zoo model (convoy summary --help lists them)"},
                     "A zoo model; with model.layers: the model's name (custom when not given)")
                    .with_flag("--model")
                    .with_default("seed_cnn (photos: plant_cnn)");
  k.check = [](const RunConfig& c) {
    if (!c.layers.empty()) return;
    try {
      nn::model_by_name(c.model);
    } catch (const UserError& e) {
      throw UserError(std::string("model.name: ") + e.what());
    }
  };
  return k;
}

ConfigKey layers_key() {
  return custom(
             "model.layers", "list of layers", "none: the zoo model",
             "The model written out as layers, instead of a zoo model",
             [](const json& v, RunConfig& c, const std::string& where) { c.layers = layers_from_json(v, where); },
             [](const RunConfig& c) -> std::optional<json> {
               if (c.layers.empty()) return std::nullopt;
               return layers_to_json(c.layers);
             })
      .with_details("A list such as `[{type: conv2d, filters: 32, kernel: 3}, relu, {type: add, inputs: [input, "
                    "relu_0]}, ...]`: a layer reads the one before it, and joins name their inputs");
}

ConfigKey loss_name_key() {
  ConfigKey k = text("loss.name", AT(loss),
                     {.note = "nll, categorical_crossentropy, sparse_categorical_crossentropy or binary_crossentropy"},
                     "nll reads log-probabilities; categorical_crossentropy takes class indices or one-hot rows; "
                     "binary_crossentropy multi-hot rows, from logits")
                    .with_default("nll (convoy train: as the model's last layer calls for)");
  k.check = [](const RunConfig& c) { loss_kind(c); };  // names the loss and the choices
  return k;
}

ConfigKey device_key() {
  ConfigKey k = text("training.device", AT(device), {.note = "auto, cpu, cuda, pjrt, pjrt:PLUGIN.so, tpu or pjrt-gpu"},
                     "auto (a usable GPU, else the CPU), cpu, cuda, or a PJRT plugin: pjrt (XLA's CPU plugin), "
                     "pjrt:PLUGIN.so, tpu, pjrt-gpu")
                    .with_flag("--device")
                    .run_setting()
                    .with_details("auto says in one line why it picks the CPU; cuda: see "
                                  "[docs/cuda.md](docs/cuda.md). A PJRT plugin compiles whole steps as StableHLO and "
                                  "falls back to the CPU in one line when absent (see "
                                  "[docs/accelerators.md](docs/accelerators.md))");
  k.check = [](const RunConfig& c) {
    require(c.device == "auto" || c.device == "cpu" || c.device == "cuda" || is_pjrt_device(c.device),
            "training.device (--device): '" + shown(c.device) +
                "' is not auto, cpu, cuda, pjrt, pjrt:PLUGIN.so, tpu or pjrt-gpu");
  };
  return k;
}

ConfigKey conv_algo_key() {
  ConfigKey k = text("training.conv_algo", AT(conv_algo), {.note = "auto, direct or winograd"},
                     "CPU: the algorithm of 3x3 stride-1 convolutions; it changes the result's bits, so checkpoints "
                     "and summary.json record it");
  k.check = [](const RunConfig& c) {
    try {
      parse_conv_algo(c.conv_algo);
    } catch (const UserError& e) {
      throw UserError(std::string("training.conv_algo: ") + e.what());
    }
  };
  return k;
}

namespace {

// A callback's options as a mapping of its fields: absent is off, an empty
// mapping is on with the defaults; `check` builds the callback, which
// validates them.
template <class Options, class... Field>
ConfigKey callback_key(std::string name, std::optional<Options> RunConfig::*member, std::string help,
                       std::string details, void (*check)(const Options&),
                       std::pair<const char*, Field Options::*>... fields) {
  ConfigKey k = custom(
      name, "mapping", "none (off)", std::move(help),
      [=](const json& v, RunConfig& c, const std::string& where) {
        Options o;
        Section s(v, where, name);
        (s.get(fields.first, o.*(fields.second)), ...);
        s.finish();
        c.*member = o;
      },
      [=](const RunConfig& c) -> std::optional<json> {
        if (!(c.*member)) return std::nullopt;
        json j = json::object();
        ((j[fields.first] = (*(c.*member)).*(fields.second)), ...);
        return j;
      });
  k.details = std::move(details);
  k.check = [=](const RunConfig& c) {
    if (c.*member) check(*(c.*member));
  };
  return k;
}

template <class Options, class T> std::pair<const char*, T Options::*> field(const char* name, T Options::*member) {
  return {name, member};
}

}  // namespace

ConfigKey early_stopping_key() {
  using O = EarlyStoppingOptions;
  return callback_key<O>(
      "callbacks.early_stopping", &RunConfig::early_stopping,
      "Stop when a metric stops improving (Keras's EarlyStopping); an empty mapping turns it on",
      "Keys: monitor (val_loss), mode (auto, min or max), patience (0), min_delta (0), restore_best_weights (false)",
      [](const O& o) { EarlyStopping check(o); },  // validates monitor, mode, patience
      field("monitor", &O::monitor), field("mode", &O::mode), field("patience", &O::patience),
      field("min_delta", &O::min_delta), field("restore_best_weights", &O::restore_best_weights));
}

ConfigKey reduce_lr_key() {
  using O = ReduceLrOptions;
  return callback_key<O>(
      "callbacks.reduce_lr_on_plateau", &RunConfig::reduce_lr_on_plateau,
      "Multiply the rate by factor when monitor has not improved for patience epochs; not with a schedule",
      "Keys: monitor (val_loss), factor (0.1), patience (10), min_lr (0), min_delta (0.0001)",
      [](const O& o) { ReduceLrOnPlateau check(o); }, field("monitor", &O::monitor), field("factor", &O::factor),
      field("patience", &O::patience), field("min_lr", &O::min_lr), field("min_delta", &O::min_delta));
}

}  // namespace convoy::train
