#include "convoy/io/run_summary.h"

#include <nlohmann/json.hpp>

#include "convoy/core/error.h"

namespace convoy::io {
namespace {

nlohmann::json epochs_json(const train::History& h) {
  nlohmann::json per_epoch = nlohmann::json::array();
  for (const auto& e : h.epochs)
    per_epoch.push_back({{"epoch", e.epoch},
                         {"train_loss", e.train_loss},
                         {"train_accuracy", e.train_accuracy},
                         {"test_loss", e.test_loss},
                         {"test_accuracy", e.test_accuracy},
                         {"train_seconds", e.train_seconds},
                         {"images_per_second", e.images_per_second},
                         {"lr", e.lr},
                         {"input_wait_seconds", e.input_wait_seconds}});
  return per_epoch;
}

}  // namespace

std::string history_json(const train::History& h) {
  return nlohmann::json{{"epochs", epochs_json(h)},
                        {"total_train_seconds", h.total_train_seconds},
                        {"images_trained", h.images_trained}}
      .dump();
}

train::History parse_history_json(const std::string& text, const std::string& where) {
  try {
    const auto j = nlohmann::json::parse(text);
    train::History h;
    h.total_train_seconds = j.at("total_train_seconds").get<double>();
    h.images_trained = j.at("images_trained").get<int64_t>();
    for (const auto& e : j.at("epochs"))
      h.epochs.push_back({.epoch = e.at("epoch").get<int64_t>(),
                          .train_loss = e.at("train_loss").get<double>(),
                          .train_accuracy = e.at("train_accuracy").get<double>(),
                          .test_loss = e.at("test_loss").get<double>(),
                          .test_accuracy = e.at("test_accuracy").get<double>(),
                          .train_seconds = e.at("train_seconds").get<double>(),
                          .images_per_second = e.at("images_per_second").get<double>(),
                          .lr = e.at("lr").get<double>(),
                          .input_wait_seconds = e.value("input_wait_seconds", 0.0)});
    return h;
  } catch (const nlohmann::json::exception& e) {
    throw UserError(where + ": bad training history (" + e.what() + "); the checkpoint is corrupt");
  }
}

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
  j["replicas"] = info.replicas;
  nlohmann::json seconds = nlohmann::json::array();
  for (const auto& e : h.epochs) seconds.push_back(e.train_seconds);
  const auto& last = h.epochs.back();
  j["test_accuracy"] = last.test_accuracy;
  j["test_loss"] = last.test_loss;
  j["train_loss"] = last.train_loss;
  j["epoch_seconds"] = seconds;
  j["total_train_seconds"] = h.total_train_seconds;
  j["images_per_second"] = h.images_per_second();
  j["input_wait_fraction"] = h.input_wait_fraction();
  j["history"] = epochs_json(h);
  return j.dump(2) + "\n";
}

}  // namespace convoy::io
