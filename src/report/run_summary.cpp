#include "convoy/report/run_summary.h"

#include <nlohmann/json.hpp>

#include "convoy/train/history_json.h"

namespace convoy::report {

std::string run_summary_json(const RunInfo& info, const train::History& h) {
  nlohmann::json j;
  j["model"] = info.model;
  j["dataset"] = info.dataset;
  j["device"] = info.device;
  if (!info.cpu_kernels.empty()) j["cpu_kernels"] = info.cpu_kernels;
  if (!info.conv_algo.empty()) j["conv_algo"] = info.conv_algo;
  j["precision"] = info.precision;
  if (info.batch_slices > 0) {
    j["parallelism"] = info.batch_slices > 1 ? "batch_slices" : "per_op";
    j["batch_slices"] = info.batch_slices;
  }
  j["threads"] = info.threads;
  j["epochs"] = info.epochs;
  j["batch_size"] = info.batch_size;
  j["lr"] = info.lr;
  j["momentum"] = info.momentum;
  j["seed"] = info.seed;
  j["replicas"] = info.replicas;
  nlohmann::json seconds = nlohmann::json::array();
  for (const auto& e : h.epochs) seconds.push_back(e.train_seconds);
  // The figures of the weights the run keeps (an earlier epoch's when early
  // stopping restored them), and which epoch that is.
  const auto& kept = h.kept();
  j["test_accuracy"] = kept.test_accuracy;
  j["test_loss"] = kept.test_loss;
  j["train_loss"] = kept.train_loss;
  j["weights_epoch"] = kept.epoch;
  if (h.stopped_epoch) j["stopped_epoch"] = h.stopped_epoch;
  j["epoch_seconds"] = seconds;
  j["total_train_seconds"] = h.total_train_seconds;
  j["images_per_second"] = h.images_per_second();
  j["input_wait_fraction"] = h.input_wait_fraction();
  if (!info.evaluation_json.empty()) j["evaluation"] = nlohmann::json::parse(info.evaluation_json);
  if (!info.data_json.empty()) j["data"] = nlohmann::json::parse(info.data_json);
  if (!info.compared_json.empty()) j["compared"] = nlohmann::json::parse(info.compared_json);
  j["skipped_steps"] = h.skipped_steps;  // updates dropped for NaN/Inf (on_nan: skip_step)
  // The per-epoch list in the one format checkpoints store (train/history_json.h).
  j["history"] = nlohmann::json::parse(train::history_json(h)).at("epochs");
  return j.dump(2) + "\n";
}

}  // namespace convoy::report
