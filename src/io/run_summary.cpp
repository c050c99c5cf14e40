#include "convoy/io/run_summary.h"

#include <nlohmann/json.hpp>

namespace convoy::io {

std::string run_summary_json(const RunInfo& info, const train::History& h) {
  nlohmann::json j;
  j["model"] = info.model;
  j["dataset"] = info.dataset;
  j["device"] = info.device;
  j["threads"] = info.threads;
  j["epochs"] = info.epochs;
  j["batch_size"] = info.batch_size;
  j["lr"] = info.lr;
  j["momentum"] = info.momentum;
  j["seed"] = info.seed;
  nlohmann::json seconds = nlohmann::json::array(), per_epoch = nlohmann::json::array();
  for (const auto& e : h.epochs) {
    seconds.push_back(e.train_seconds);
    per_epoch.push_back({{"epoch", e.epoch},
                         {"train_loss", e.train_loss},
                         {"train_accuracy", e.train_accuracy},
                         {"test_loss", e.test_loss},
                         {"test_accuracy", e.test_accuracy},
                         {"train_seconds", e.train_seconds},
                         {"images_per_second", e.images_per_second}});
  }
  const auto& last = h.epochs.back();
  j["test_accuracy"] = last.test_accuracy;
  j["test_loss"] = last.test_loss;
  j["train_loss"] = last.train_loss;
  j["epoch_seconds"] = seconds;
  j["total_train_seconds"] = h.total_train_seconds;
  j["images_per_second"] = h.images_per_second();
  j["history"] = per_epoch;
  return j.dump(2) + "\n";
}

}  // namespace convoy::io
