#pragma once
// Checkpoints: everything needed to continue a run where it stopped, in one
// safetensors file written atomically — the weights under the model's tensor
// names (so any safetensors reader loads them), BN statistics, the optimizer's
// state, and as metadata the run config, the epochs done and the history.
// The data order needs no state of its own: epoch e's shuffle depends only on
// (seed, e).
#include <optional>
#include <string>

#include "convoy/backends/executable.h"
#include "convoy/nn/model.h"
#include "convoy/train/callbacks.h"
#include "convoy/train/run_config.h"

namespace convoy::train {

inline constexpr const char* kCheckpointFile = "checkpoint.safetensors";

struct Checkpoint {
  RunConfig config;
  int64_t epoch = 0;  // epochs completed
  History history;
  std::vector<float> params, state, optimizer_state;
};

void save_checkpoint(const std::string& path, const nn::Model& model, const Executable& exe,
                     const RunConfig& config, const History& history);
// Throws UserError naming the file when it is missing, corrupt, or not a
// checkpoint of `model`'s shape.
Checkpoint load_checkpoint(const std::string& path);

// Saves a checkpoint after every epoch, or with save_best_only (Keras's
// ModelCheckpoint) only after epochs where `monitor` improved.
class CheckpointSaver : public Callback {
 public:
  CheckpointSaver(std::string path, const nn::Model& model, RunConfig config, bool save_best_only = false,
                  std::string monitor = "val_loss");
  void on_epoch_end(FitState& s, const EpochRecord& r) override;

 private:
  std::string path_;
  const nn::Model& model_;
  RunConfig config_;
  bool best_only_;
  std::string monitor_;
  bool maximize_;
  std::optional<double> best_;
};

}  // namespace convoy::train
