// Which given settings a run would not read (config_warnings.h).
#include "convoy/config/config_warnings.h"

#include <algorithm>

namespace convoy::train {
namespace {

struct OptimizerKey {
  const char* key;
  std::vector<std::string> readers;  // the optimizers that read it
};

}  // namespace

std::vector<std::string> ignored_settings(const RunConfig& c, const std::set<std::string>& given) {
  std::vector<std::string> out;
  const auto has = [&](const std::string& key) { return given.count(key) > 0; };
  const std::vector<OptimizerKey> optimizer_keys = {{"momentum", {"sgd", "rmsprop"}},
                                                    {"nesterov", {"sgd"}},
                                                    {"beta1", {"adam", "adamw"}},
                                                    {"beta2", {"adam", "adamw"}},
                                                    {"eps", {"adam", "adamw", "rmsprop"}},
                                                    {"alpha", {"rmsprop"}}};
  for (const auto& [key, readers] : optimizer_keys) {
    if (!has(std::string("optimizer.") + key)) continue;
    if (std::find(readers.begin(), readers.end(), c.optimizer) != readers.end()) continue;
    std::string names;
    for (const auto& r : readers) names += (names.empty() ? "" : ", ") + r;
    out.push_back(std::string("optimizer.") + key + " is ignored: " + c.optimizer + " does not read it (" + names +
                  " do)");
  }
  const bool transfer = !c.pretrained.empty();
  if (!transfer)
    for (const char* key : {"transfer.fine_tune_lr", "transfer.fine_tune_batch_norm", "model.head"})
      if (has(key))
        out.push_back(std::string(key) + " is ignored without model.pretrained (it shapes fine-tuning of "
                                         "pretrained weights)");
  if (c.freeze_epochs > 0 && !transfer)
    out.push_back("transfer.freeze_epochs (--freeze-epochs) trains the head alone on random weights: without "
                  "model.pretrained the frozen layers learn nothing in those epochs");
  if (!c.data.reads_images())
    for (const std::string& key : given)
      if (key.starts_with("data.") && key != "data.dir" && key != "data.kind" &&
          !key.starts_with("data.class_weight"))  // an error of its own (preflight)
        out.push_back(key + " is ignored: Fashion-MNIST's IDX data reads only data.dir (the other data keys are "
                            "for images: class folders, a CSV, TFRecords)");
  if (!c.schedule.active())
    for (const char* key : {"schedule.step_epochs", "schedule.gamma", "schedule.min_lr", "schedule.max_lr",
                            "schedule.warmup_epochs"})
      if (has(key)) out.push_back(std::string(key) + " is ignored: no schedule.kind is set");
  return out;
}

}  // namespace convoy::train
