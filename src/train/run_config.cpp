#include "convoy/train/run_config.h"

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
#include "train/config_json.h"
#include "train/config_section.h"
#include "train/data_config.h"
#include "train/layer_config.h"
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

RunConfig config_from_json(const json& root, const std::string& where, bool check_values) {
  RunConfig c;
  Section top(root, where, "");
  {
    Section s = top.sub("data");
    read_data_section(s, c);
    s.finish();
  }
  {
    Section s = top.sub("model");
    s.get("name", c.model);
    if (const json* layers = s.raw("layers")) {
      c.layers = layers_from_json(*layers, where);
      if (!s.has("name")) c.model = "custom";
    }
    s.get("pretrained", c.pretrained);
    s.get("head", c.head);
    s.finish();
  }
  {
    Section s = top.sub("transfer");
    s.get("freeze_epochs", c.freeze_epochs);
    s.get("fine_tune_lr", c.fine_tune_lr);
    s.get("compare_with_scratch", c.compare_with_scratch);
    s.get("fine_tune_batch_norm", c.fine_tune_batch_norm);
    s.finish();
  }
  {
    Section s = top.sub("loss");
    s.get("name", c.loss);
    s.get("from_logits", c.from_logits);
    s.get("label_smoothing", c.label_smoothing);
    s.finish();
  }
  {
    Section s = top.sub("optimizer");
    s.get("name", c.optimizer);
    s.get("lr", c.lr);
    s.get("momentum", c.momentum);
    s.get("weight_decay", c.weight_decay);
    s.get("nesterov", c.nesterov);
    s.get("beta1", c.beta1);
    s.get("beta2", c.beta2);
    s.get("eps", c.eps);
    s.get("alpha", c.alpha);
    s.get("clip_norm", c.clip_norm);
    s.finish();
  }
  {
    Section s = top.sub("schedule");
    s.get("kind", c.schedule.kind);
    s.get("step_epochs", c.schedule.step_epochs);
    s.get("gamma", c.schedule.gamma);
    s.get("min_lr", c.schedule.min_lr);
    s.get("max_lr", c.schedule.max_lr);
    s.get("warmup_epochs", c.schedule.warmup_epochs);
    s.finish();
  }
  {
    Section s = top.sub("training");
    s.get("epochs", c.epochs);
    s.get("batch_size", c.batch_size);
    s.get("steps_per_execution", c.steps_per_execution);
    s.get("checkpoint_every_steps", c.checkpoint_every_steps);
    s.get("seed", c.seed);
    s.get("threads", c.threads);
    s.get("device", c.device);
    s.get("conv_algo", c.conv_algo);
    s.get("precision", c.precision);
    s.finish();
  }
  {
    Section s = top.sub("callbacks");
    s.get("terminate_on_nan", c.terminate_on_nan);
    s.get("on_nan", c.on_nan);
    if (s.has("early_stopping")) {
      EarlyStoppingOptions e;
      Section es = s.sub("early_stopping");
      es.get("monitor", e.monitor);
      es.get("mode", e.mode);
      es.get("patience", e.patience);
      es.get("min_delta", e.min_delta);
      es.get("restore_best_weights", e.restore_best_weights);
      es.finish();
      c.early_stopping = e;
    } else {
      s.sub("early_stopping");  // known, absent
    }
    if (s.has("reduce_lr_on_plateau")) {
      ReduceLrOptions r;
      Section rs = s.sub("reduce_lr_on_plateau");
      rs.get("monitor", r.monitor);
      rs.get("factor", r.factor);
      rs.get("patience", r.patience);
      rs.get("min_lr", r.min_lr);
      rs.get("min_delta", r.min_delta);
      rs.finish();
      c.reduce_lr_on_plateau = r;
    } else {
      s.sub("reduce_lr_on_plateau");
    }
    s.finish();
  }
  {
    Section s = top.sub("distributed");
    s.get("strategy", c.strategy);
    s.get("scale_lr", c.scale_lr);
    s.get("sync_batch_norm", c.sync_batch_norm);
    s.get("timeout_seconds", c.dist_timeout);
    s.get("bucket_kib", c.bucket_kib);
    s.finish();
  }
  {
    Section s = top.sub("output");
    s.get("dir", c.out_dir);
    s.get("progress", c.progress);
    s.get("profile", c.profile);
    s.finish();
  }
  top.finish();
  if (!check_values) return c;
  try {
    validate(c);
  } catch (const UserError& e) {
    throw UserError(where + ": " + e.what());
  }
  return c;
}

namespace {

// Configs are stored as JSON in checkpoints and summaries, which hold UTF-8 only.
void require_utf8(const std::string& value, const std::string& key) {
  try {
    (void)json(value).dump();
  } catch (const json::exception&) {
    throw UserError(key + ": " + shown(value) + " is not valid UTF-8; use a name in UTF-8");
  }
}

}  // namespace

void validate(const RunConfig& c) {
  require_utf8(c.data_dir, "data.dir (--data)");
  require_utf8(c.out_dir, "output.dir (--out)");
  for (const auto* text : {&c.model, &c.optimizer, &c.schedule.kind, &c.progress, &c.on_nan})
    require_utf8(*text, "a config value");
  for (const auto* text : {&c.data.train_csv, &c.data.test_csv, &c.data.images, &c.data.files})
    require_utf8(*text, "a data path");
  for (const auto& name : c.data.classes) require_utf8(name, "data.classes");
  validate_data(c.data);
  if (c.layers.empty()) {
    try {
      nn::model_by_name(c.model);
    } catch (const UserError& e) {
      throw UserError(std::string("model.name: ") + e.what());
    }
  }
  try {
    optim::parse_kind(c.optimizer);
  } catch (const UserError& e) {
    throw UserError(std::string("optimizer.name: ") + e.what());
  }
  loss_kind(c);
  require(c.label_smoothing >= 0 && c.label_smoothing < 1, "loss.label_smoothing must be in [0, 1)");
  require(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1, "optimizer.beta1 and beta2 must be in [0, 1)");
  require(c.eps > 0, "optimizer.eps must be positive");
  require(c.alpha >= 0 && c.alpha < 1, "optimizer.alpha must be in [0, 1)");
  require(c.clip_norm >= 0, "optimizer.clip_norm must be 0 (off) or positive");
  validate(c.schedule);
  require(!(c.schedule.active() && c.reduce_lr_on_plateau),
          "use either a schedule or callbacks.reduce_lr_on_plateau, not both: each would override the other's rate");
  if (c.reduce_lr_on_plateau) ReduceLrOnPlateau check(*c.reduce_lr_on_plateau);
  require(c.epochs >= 1, "training.epochs (--epochs) must be at least 1");
  require(c.batch_size >= 1, "training.batch_size (--batch-size) must be at least 1");
  require(c.steps_per_execution >= 1, "training.steps_per_execution must be at least 1");
  require(c.checkpoint_every_steps >= 0,
          "training.checkpoint_every_steps (--checkpoint-every-steps) must be 0 (off) or positive");
  parse_on_nan(c.on_nan, "callbacks.on_nan (--on-nan)");
  require(c.lr > 0 && c.lr <= std::numeric_limits<float>::max(),
          "optimizer.lr (--lr) must be positive and finite (at most 3.4e38, a float)");
  require(c.momentum >= 0 && c.momentum < 1, "optimizer.momentum (--momentum) must be in [0, 1)");
  require(c.weight_decay >= 0, "optimizer.weight_decay must be 0 or more");
  parse_conv_algo(c.conv_algo);  // throws naming the choices
  parse_precision(c.precision);
  require(c.threads >= 0, "training.threads (--threads) must be 0 (all cores) or positive");
  require(c.device == "auto" || c.device == "cpu" || c.device == "cuda" || is_pjrt_device(c.device),
          "training.device (--device): '" + shown(c.device) +
              "' is not auto, cpu, cuda, pjrt, pjrt:PLUGIN.so, tpu or pjrt-gpu");
  require(c.progress == "auto" || c.progress == "bar" || c.progress == "lines" || c.progress == "quiet",
          "output.progress (--progress): '" + shown(c.progress) + "' is not auto, bar, lines or quiet");
  if (c.early_stopping) EarlyStopping check(*c.early_stopping);  // validates monitor, mode, patience
  require(c.strategy == "single" || c.strategy == "mpi" || c.strategy == "nccl",
          "distributed.strategy (--strategy): '" + shown(c.strategy) + "' is not single, mpi or nccl");
  require(c.strategy != "nccl" || c.device != "cpu",
          "distributed.strategy nccl trains one replica per GPU, but training.device (--device) is cpu; use "
          "--strategy mpi for replicas on CPUs");
  require(c.dist_timeout > 0, "distributed.timeout_seconds (--dist-timeout) must be positive");
  require(c.bucket_kib >= 0, "distributed.bucket_kib (--dist-bucket-kib) must be 0 (off) or positive");
  require(c.freeze_epochs >= 0 && c.freeze_epochs <= c.epochs,
          "transfer.freeze_epochs must be between 0 and training.epochs (" + std::to_string(c.epochs) + ")");
  require(c.fine_tune_lr >= 0, "transfer.fine_tune_lr must be 0 (optimizer.lr) or positive");
  require(!c.compare_with_scratch || c.strategy == "single",
          "transfer.compare_with_scratch runs one process; train the scratch model as a separate run with replicas");
  require_utf8(c.pretrained, "model.pretrained");
  require_utf8(c.head, "model.head");
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
      root = yaml_to_json(YAML::Load(text), budget);
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
  json j = {{"data", data_section_json(c)},
            {"model", c.layers.empty() ? json{{"name", c.model}}
                                       : json{{"name", c.model}, {"layers", layers_to_json(c.layers)}}},
            {"transfer",
             {{"freeze_epochs", c.freeze_epochs}, {"fine_tune_lr", c.fine_tune_lr},
              {"compare_with_scratch", c.compare_with_scratch}, {"fine_tune_batch_norm", c.fine_tune_batch_norm}}},
            {"loss", {{"name", c.loss}, {"from_logits", c.from_logits}, {"label_smoothing", c.label_smoothing}}},
            {"optimizer",
             {{"name", c.optimizer}, {"lr", c.lr}, {"momentum", c.momentum}, {"weight_decay", c.weight_decay},
              {"nesterov", c.nesterov}, {"beta1", c.beta1}, {"beta2", c.beta2}, {"eps", c.eps}, {"alpha", c.alpha},
              {"clip_norm", c.clip_norm}}},
            {"schedule",
             {{"kind", c.schedule.kind}, {"step_epochs", c.schedule.step_epochs}, {"gamma", c.schedule.gamma},
              {"min_lr", c.schedule.min_lr}, {"max_lr", c.schedule.max_lr},
              {"warmup_epochs", c.schedule.warmup_epochs}}},
            {"training",
             {{"epochs", c.epochs}, {"batch_size", c.batch_size}, {"steps_per_execution", c.steps_per_execution},
              {"checkpoint_every_steps", c.checkpoint_every_steps}, {"seed", c.seed}, {"threads", c.threads}, {"device", c.device},
              {"conv_algo", c.conv_algo}, {"precision", c.precision}}},
            {"callbacks", {{"terminate_on_nan", c.terminate_on_nan}, {"on_nan", c.on_nan}}},
            {"distributed",
             {{"strategy", c.strategy}, {"scale_lr", c.scale_lr}, {"sync_batch_norm", c.sync_batch_norm},
              {"timeout_seconds", c.dist_timeout}, {"bucket_kib", c.bucket_kib}}},
            {"output", {{"dir", c.out_dir}, {"progress", c.progress}, {"profile", c.profile}}}};
  if (!c.pretrained.empty()) j["model"]["pretrained"] = c.pretrained;
  if (!c.head.empty()) j["model"]["head"] = c.head;
  if (c.early_stopping) {
    const auto& e = *c.early_stopping;
    j["callbacks"]["early_stopping"] = {{"monitor", e.monitor},
                                        {"mode", e.mode},
                                        {"patience", e.patience},
                                        {"min_delta", e.min_delta},
                                        {"restore_best_weights", e.restore_best_weights}};
  }
  if (c.reduce_lr_on_plateau) {
    const auto& r = *c.reduce_lr_on_plateau;
    j["callbacks"]["reduce_lr_on_plateau"] = {{"monitor", r.monitor}, {"factor", r.factor}, {"patience", r.patience},
                                              {"min_lr", r.min_lr}, {"min_delta", r.min_delta}};
  }
  return j.dump(2);
}

}  // namespace convoy::train
