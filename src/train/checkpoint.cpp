#include "convoy/train/checkpoint.h"

#include <algorithm>

#include "convoy/core/error.h"
#include "convoy/io/model_weights.h"
#include "convoy/io/run_summary.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/nn/zoo.h"

namespace convoy::train {
namespace {

constexpr const char* kFormat = "convoy-checkpoint-1";
constexpr const char* kOptimizerTensor = "optimizer.state";

}  // namespace

void save_checkpoint(const std::string& path, const nn::Model& model, const Executable& exe,
                     const RunConfig& config, const History& history) {
  std::vector<float> params(exe.parameter_count()), state(exe.state_count());
  exe.get_parameters(params);
  exe.get_state(state);
  io::NamedTensors tensors = io::to_named(model, params, state);
  Tensor velocity(DType::f32, {exe.optimizer_state_size()});
  exe.get_optimizer_state(velocity.data<float>());
  tensors.emplace(kOptimizerTensor, std::move(velocity));
  const int64_t epoch = history.epochs.empty() ? 0 : history.epochs.back().epoch;
  io::write_safetensors(path, tensors,
                        {{"format", kFormat},
                         {"epoch", std::to_string(epoch)},
                         {"config", run_config_json(config)},
                         {"history", io::history_json(history)}});
}

CheckpointSaver::CheckpointSaver(std::string path, const nn::Model& model, RunConfig config, bool save_best_only,
                                 std::string monitor)
    : path_(std::move(path)), model_(model), config_(std::move(config)), best_only_(save_best_only),
      monitor_(std::move(monitor)), maximize_(monitor_.find("acc") != std::string::npos) {
  check_metric_name(monitor_, "checkpoint monitor");
}

void CheckpointSaver::on_epoch_end(FitState& s, const EpochRecord& r) {
  if (best_only_) {
    const double v = metric_value(r, monitor_);
    if (best_ && !(maximize_ ? v > *best_ : v < *best_)) return;
    best_ = v;
  }
  save_checkpoint(path_, model_, s.exe, config_, s.history);
}

Checkpoint load_checkpoint(const std::string& path) {
  io::Metadata meta;
  const io::NamedTensors tensors = io::read_safetensors(path, &meta);
  require(meta.count("format") && meta.at("format") == kFormat && meta.count("config") && meta.count("epoch") &&
              meta.count("history"),
          path + ": not a convoy checkpoint (no convoy metadata); pass the folder of a convoy train --out run");
  Checkpoint c;
  c.config = parse_run_config(meta.at("config"), path + " (config)", /*yaml=*/false);
  c.history = io::parse_history_json(meta.at("history"), path);
  try {
    c.epoch = std::stoll(meta.at("epoch"));
  } catch (const std::exception&) {
    throw UserError(path + ": bad epoch '" + meta.at("epoch") + "' in the checkpoint metadata");
  }
  const nn::Model model = build_model(c.config, data::kFashionMnistShape);
  io::FlatWeights w = io::from_named(model, tensors, path);
  c.params = std::move(w.params);
  c.state = std::move(w.state);
  auto it = tensors.find(kOptimizerTensor);
  const int64_t want = optim::state_size(optimizer_options(c.config), model.num_parameters());
  require(it != tensors.end() && it->second.dtype() == DType::f32 && it->second.numel() == want,
          path + ": missing or mis-sized '" + std::string(kOptimizerTensor) + "'; the checkpoint is corrupt");
  const auto v = it->second.data<float>();
  c.optimizer_state.assign(v.begin(), v.end());
  return c;
}

}  // namespace convoy::train
