#pragma once
// Checkpoints: everything needed to continue a run where it stopped, in one
// safetensors file written atomically — the weights under the model's tensor
// names (so any safetensors reader loads them), BN statistics, the optimizer's
// state, and as metadata the run config, the position (epochs done, steps of
// the next epoch done, their running metric sums, the learning rate), the
// history and a CRC-32 of all of it. The data order needs no state of its
// own: epoch e's shuffle depends only on (seed, e), so a position is enough.
//
// The main checkpoint keeps its predecessor as checkpoint.prev.safetensors;
// loading falls back to it when the newest one is damaged.
#include <optional>
#include <ostream>
#include <string>

#include "convoy/backends/executable.h"
#include "convoy/io/safetensors.h"
#include "convoy/nn/model.h"
#include "convoy/train/callbacks.h"
#include "convoy/config/run_config.h"

namespace convoy::train {

inline constexpr const char* kCheckpointFile = "checkpoint.safetensors";
inline constexpr const char* kPreviousCheckpointFile = "checkpoint.prev.safetensors";

struct Checkpoint {
  RunConfig config;
  int64_t epoch = 0;       // epochs completed
  EpochProgress progress;  // of epoch `epoch + 1` (step 0: at an epoch boundary)
  float lr = 0;            // the learning rate in effect
  History history;
  std::vector<float> params, state, optimizer_state;
};

struct SaveOptions {
  EpochProgress progress;    // mid-epoch position; default: the end of the last epoch in history
  bool keep_previous = false;  // keep the file being replaced as checkpoint.prev.safetensors beside it
  // Fault injection: milliseconds between the flushed temporary file and the
  // rename, so a crash test can kill inside a write (tests/kill_resume.sh).
  int pause_before_rename_ms = 0;
};

void save_checkpoint(const std::string& path, const nn::Model& model, const Executable& exe,
                     const RunConfig& config, const History& history, const SaveOptions& options = {});
// Throws UserError naming the file when it is missing, fails its checksum, is
// corrupt, or is not a checkpoint of its model's shape.
Checkpoint load_checkpoint(const std::string& path);
// The same from the file's bytes (`where` names them in errors).
Checkpoint parse_checkpoint(std::string_view bytes, const std::string& where);
// The metadata alone (config, position, history; no tensors, no checksum).
Checkpoint parse_checkpoint_metadata(const io::Metadata& meta, const std::string& where);

// The newest usable checkpoint in the run folder `dir`: checkpoint.safetensors,
// or, when that is missing or damaged, checkpoint.prev.safetensors after a
// one-line warning on `warn`. One UserError naming both when neither loads.
Checkpoint load_latest_checkpoint(const std::string& dir, std::ostream& warn);

struct CheckpointSaverOptions {
  bool save_best_only = false;  // Keras's ModelCheckpoint: only after epochs where `monitor` improved
  std::string monitor = "val_loss";
  int64_t every_steps = 0;      // > 0: also every N steps within an epoch
  bool keep_previous = false;   // see SaveOptions
  int pause_before_rename_ms = 0;  // see SaveOptions
};

// Saves a checkpoint after every epoch (or only the best ones), every N steps
// if asked, and at once when a callback interrupts the fit (a signal).
class CheckpointSaver : public Callback {
 public:
  CheckpointSaver(std::string path, const nn::Model& model, RunConfig config,
                  CheckpointSaverOptions options = {});
  void on_train_begin(FitState& s) override;
  void on_step_end(FitState& s) override;
  void on_epoch_end(FitState& s, const EpochRecord& r) override;

 private:
  bool improved(double v) const;
  std::string path_;
  const nn::Model& model_;
  RunConfig config_;
  CheckpointSaverOptions options_;
  bool maximize_;
  std::optional<double> best_;
};

}  // namespace convoy::train
