#include "convoy/config/run_config.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "convoy/backends/devices.h"
#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/nn/zoo.h"
#include "convoy/config/config_schema.h"
#include "config/config_json.h"
#include "config/config_section.h"
#include "config/data_config.h"
#include "config/layer_config.h"
#include "convoy/train/numerical_guard.h"

namespace convoy::train {
namespace {

using nlohmann::json;

// A YAML scalar becomes the JSON type it reads as: bool, integer, number, or string.
json scalar_to_json(const std::string& s) {
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  if (s == "null" || s == "~") return nullptr;
  int64_t i = 0;
  if (auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), i); ec == std::errc() && p == s.data() + s.size())
    return i;
  double d = 0;
  if (auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d); ec == std::errc() && p == s.data() + s.size())
    return d;
  return s;
}

// Aliases are expanded, so a small file can stand for a huge tree ("billion
// laughs"): the values made are counted against kMaxYamlNodes, an alias at
// each use, and nesting is held to kMaxNesting as for JSON. A key given twice
// in one mapping is refused, not silently overwritten.
struct YamlBudget {
  std::string where;
  int64_t nodes = 0;
};

json yaml_to_json(const YAML::Node& n, YamlBudget& budget, int depth = 0) {
  if (++budget.nodes > kMaxYamlNodes)
    throw UserError(budget.where + ": the YAML expands to more than " + std::to_string(kMaxYamlNodes) +
                    " values (aliases counted at each use); a run config is far smaller");
  const bool nests = n.Type() == YAML::NodeType::Map || n.Type() == YAML::NodeType::Sequence;
  if (nests && depth >= kMaxNesting)
    throw UserError(budget.where + ": the YAML nests deeper than " + std::to_string(kMaxNesting) +
                    " levels, more than convoy reads");
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : n) {
        const std::string key = kv.first.as<std::string>();
        if (out.contains(key))
          throw UserError(budget.where + ": the key '" + shown(key) + "' appears twice in one mapping; keep one");
        out[key] = yaml_to_json(kv.second, budget, depth + 1);
      }
      return out;
    }
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& v : n) out.push_back(yaml_to_json(v, budget, depth + 1));
      return out;
    }
    case YAML::NodeType::Scalar: return n.Tag() == "!" ? json(n.Scalar()) : scalar_to_json(n.Scalar());
    default: return nullptr;
  }
}

}  // namespace

namespace {

// Walks one mapping of a config: each entry is a key of config_schema(),
// read by it, or a section walked in turn; anything else is an unknown key
// named with the close ones.
void read_section(const json& j, const std::string& section, RunConfig& c, const std::string& where) {
  require(j.is_object(), where + ": '" + (section.empty() ? "(top level)" : section) + "' must be a mapping");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string dotted = section.empty() ? it.key() : section + "." + it.key();
    if (const ConfigKey* key = find_config_key(dotted)) {
      key->read(*it, c, where);
    } else if (is_config_section(dotted)) {
      read_section(*it, dotted, c, where);
    } else {
      throw unknown_key(where, section, it.key(), config_children(section));
    }
  }
}

// "data.augment.zoom" as the JSON pointer "/data/augment/zoom".
json::json_pointer pointer_of(const std::string& dotted) {
  std::string path = "/";
  path += dotted;
  std::replace(path.begin(), path.end(), '.', '/');
  return json::json_pointer(path);
}

}  // namespace

RunConfig config_from_json(const json& root, const std::string& where, bool check_values) {
  RunConfig c;
  read_section(root, "", c, where);
  // A layer list without a name is a custom model, not the default zoo one.
  const auto model = root.find("model");
  if (model != root.end() && model->contains("layers") && !model->contains("name")) c.model = "custom";
  if (!check_values) return c;
  try {
    validate(c);
  } catch (const UserError& e) {
    throw UserError(where + ": " + e.what());
  }
  return c;
}

void validate(const RunConfig& c) {
  // Each key alone: its type's range or names, UTF-8 (config_schema.cpp).
  for (const ConfigKey& key : config_schema())
    if (!key.images_only || key.always_checked || c.data.reads_images()) check_config_key(key, c);
  // Keys together.
  validate_data(c.data);
  validate(c.schedule);
  require(!(c.schedule.active() && c.reduce_lr_on_plateau),
          "use either a schedule or callbacks.reduce_lr_on_plateau, not both: each would override the other's rate");
  require(c.strategy != "nccl" || c.device != "cpu",
          "distributed.strategy nccl trains one replica per GPU, but training.device (--device) is cpu; use "
          "--strategy mpi for replicas on CPUs");
  require(c.replicas == 1 || is_pjrt_device(c.device),
          "training.replicas (--replicas) " + std::to_string(c.replicas) +
              " runs replicas inside one PJRT program; use it with --device pjrt, tpu or pjrt-gpu (on CPUs "
              "without PJRT: --strategy mpi)");
  require(c.replicas == 1 || c.strategy == "single",
          "training.replicas (--replicas) and distributed.strategy '" + c.strategy +
              "' are two ways to make replicas; use one");
  require(c.freeze_epochs >= 0 && c.freeze_epochs <= c.epochs,
          "transfer.freeze_epochs must be between 0 and training.epochs (" + std::to_string(c.epochs) + ")");
  require(!c.compare_with_scratch || c.strategy == "single",
          "transfer.compare_with_scratch runs one process; train the scratch model as a separate run with replicas");
}

optim::OptimizerOptions optimizer_options(const RunConfig& c) {
  return {.kind = optim::parse_kind(c.optimizer),
          .lr = static_cast<float>(c.lr),
          .momentum = static_cast<float>(c.momentum),
          .weight_decay = static_cast<float>(c.weight_decay),
          .nesterov = c.nesterov,
          .beta1 = static_cast<float>(c.beta1),
          .beta2 = static_cast<float>(c.beta2),
          .eps = static_cast<float>(c.eps),
          .alpha = static_cast<float>(c.alpha),
          .clip_norm = static_cast<float>(c.clip_norm)};
}

Shape model_input_shape(const RunConfig& c) {
  if (!c.data.reads_images()) return data::kFashionMnistShape;
  return {c.data.channels, c.data.height, c.data.width};
}

int64_t model_classes(const RunConfig& c) {
  return c.data.reads_images() ? static_cast<int64_t>(c.data.classes.size()) : 0;
}

Loss loss_kind(const RunConfig& c) {
  if (c.loss == "nll") return Loss::nll;
  if (c.loss == "categorical_crossentropy" || c.loss == "sparse_categorical_crossentropy")
    return c.from_logits ? Loss::softmax_cross_entropy : Loss::nll;
  if (c.loss == "binary_crossentropy") {
    require(c.from_logits,
            "loss: binary_crossentropy takes logits in convoy (stable, fused with the sigmoid); end the model "
            "without a sigmoid and set loss.from_logits: true");
    return Loss::binary_cross_entropy;
  }
  throw UserError("loss.name: unknown loss '" + shown(c.loss) +
                  "'; available: nll, categorical_crossentropy, sparse_categorical_crossentropy, binary_crossentropy");
}

json config_text_to_json(const std::string& text, const std::string& where, bool yaml) {
  json root;
  if (yaml) {
    try {
      YamlBudget budget{where};
      // Every document is read, so a second one ("---" again, two configs
      // pasted together) is refused instead of silently dropped. Empty ones
      // (a trailing "---", as some editors and generators end a file) hold
      // nothing to drop and are not counted.
      std::vector<YAML::Node> documents = YAML::LoadAll(text);
      std::erase_if(documents, [](const YAML::Node& d) { return d.IsNull(); });
      require(documents.size() <= 1, where + ": holds " + std::to_string(documents.size()) +
                                         " YAML documents (separated by '---'); a run config is one, so keep one "
                                         "or merge them");
      if (!documents.empty()) root = yaml_to_json(documents.front(), budget);
    } catch (const YAML::Exception& e) {
      throw UserError(where + ": not valid YAML (" + shown(std::string_view(e.what()), 160) + ")");
    }
  } else {
    root = parse_json_bounded(text, where + ": not valid JSON");
  }
  if (root.is_null()) root = json::object();  // an empty file: all defaults
  return root;
}

RunConfig parse_run_config(const std::string& text, const std::string& where, bool yaml) {
  return config_from_json(config_text_to_json(text, where, yaml), where);
}

std::string run_config_json(const RunConfig& c) {
  json j = json::object();
  for (const ConfigKey& key : config_schema()) {
    if (key.images_only && !c.data.reads_images()) continue;  // Fashion-MNIST configs stay as they were
    if (std::optional<json> v = key.write(c)) j[pointer_of(key.name)] = std::move(*v);
  }
  return j.dump(2);
}

}  // namespace convoy::train
