#include "convoy/io/run_summary.h"

#include <limits>

#include <nlohmann/json.hpp>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

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
  nlohmann::json j{{"epochs", epochs_json(h)},
                   {"total_train_seconds", h.total_train_seconds},
                   {"images_trained", h.images_trained},
                   {"skipped_steps", h.skipped_steps}};
  if (h.stopped_epoch) j["stopped_epoch"] = h.stopped_epoch;
  if (h.weights_epoch) j["weights_epoch"] = h.weights_epoch;
  return j.dump();
}

namespace {

// Typed reads that reject what a plain get<> would convert with undefined
// behaviour (a float too large for an integer, say).
int64_t whole(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  require(it != j.end() && it->is_number_integer(),
          where + ": bad training history ('" + key + "' is not a whole number); the checkpoint is corrupt");
  return it->get<int64_t>();
}
// JSON has no NaN: a NaN figure (a validation loss after a blow-up) is
// written as null, and null reads back as NaN.
double number(const nlohmann::json& j, const char* key, const std::string& where, bool optional = false) {
  const auto it = j.find(key);
  if (optional && it == j.end()) return 0.0;
  if (it != j.end() && it->is_null()) return std::numeric_limits<double>::quiet_NaN();
  require(it != j.end() && it->is_number(),
          where + ": bad training history ('" + key + "' is not a number); the checkpoint is corrupt");
  return it->get<double>();
}

}  // namespace

train::History parse_history_json(const std::string& text, const std::string& where) {
  try {
    const auto j = parse_json_bounded(text, where + ": bad training history");
    require(j.is_object() && j.contains("epochs") && j.at("epochs").is_array(),
            where + ": bad training history (no list of epochs); the checkpoint is corrupt");
    train::History h;
    h.total_train_seconds = number(j, "total_train_seconds", where);
    h.images_trained = whole(j, "images_trained", where);
    h.skipped_steps = j.contains("skipped_steps") ? whole(j, "skipped_steps", where) : 0;
    h.stopped_epoch = j.contains("stopped_epoch") ? whole(j, "stopped_epoch", where) : 0;
    h.weights_epoch = j.contains("weights_epoch") ? whole(j, "weights_epoch", where) : 0;
    for (const auto& e : j.at("epochs")) {
      require(e.is_object(), where + ": bad training history (an epoch is not an object); the checkpoint is corrupt");
      h.epochs.push_back({.epoch = whole(e, "epoch", where),
                          .train_loss = number(e, "train_loss", where),
                          .train_accuracy = number(e, "train_accuracy", where),
                          .test_loss = number(e, "test_loss", where),
                          .test_accuracy = number(e, "test_accuracy", where),
                          .train_seconds = number(e, "train_seconds", where),
                          .images_per_second = number(e, "images_per_second", where),
                          .lr = number(e, "lr", where),
                          .input_wait_seconds = number(e, "input_wait_seconds", where, /*optional=*/true)});
      const int64_t before = h.epochs.size() > 1 ? h.epochs[h.epochs.size() - 2].epoch : 0;
      require(h.epochs.back().epoch > before,
              where + ": bad training history (epochs out of order); the checkpoint is corrupt");
    }
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
  if (!info.cpu_kernels.empty()) j["cpu_kernels"] = info.cpu_kernels;
  if (!info.conv_algo.empty()) j["conv_algo"] = info.conv_algo;
  j["precision"] = info.precision;
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
  j["history"] = epochs_json(h);
  return j.dump(2) + "\n";
}

}  // namespace convoy::io
