#pragma once
// Checkpoints: everything needed to continue a run where it stopped, in one
// safetensors file written atomically — the weights under the model's tensor
// names (so any safetensors reader loads them), BN statistics, the optimizer's
// state, and as metadata what the writer records of its run (JSON text that
// train/ stores and never reads: the CLI's run config, which app/ parses and
// rebuilds the model from, app/run_checkpoint.h), the position (epochs done,
// steps of the next epoch done, their running metric sums, the learning
// rate), the history and a CRC-32 of all of it. The data order needs no
// state of its own: epoch e's shuffle depends only on (seed, e), so a
// position is enough.
//
// A run's main checkpoint keeps its predecessor as checkpoint.prev.safetensors
// (SaveOptions::keep_previous); a run's reader (load_latest_checkpoint) falls
// back to it when the newest one is damaged.
#include <optional>
#include <string>
#include <string_view>

#include "convoy/backends/executable.h"
#include "convoy/io/safetensors.h"
#include "convoy/nn/model.h"
#include "convoy/optim/optimizer.h"
#include "convoy/train/callbacks.h"

namespace convoy::train {

inline constexpr const char* kCheckpointFile = "checkpoint.safetensors";
inline constexpr const char* kPreviousCheckpointFile = "checkpoint.prev.safetensors";

// Where training stands: what a resume writes back into a compiled model.
struct Checkpoint {
  int64_t epoch = 0;       // epochs completed
  EpochProgress progress;  // of epoch `epoch + 1` (step 0: at an epoch boundary)
  float lr = 0;            // the learning rate in effect
  History history;
  std::vector<float> params, state, optimizer_state;
};

struct SaveOptions {
  // What to record of the run, as JSON text kept as it is (a reader that
  // rebuilds the model from it; "{}" when nothing needs to).
  std::string config = "{}";
  EpochProgress progress;    // mid-epoch position; default: the end of the last epoch in history
  bool keep_previous = false;  // keep the file being replaced as checkpoint.prev.safetensors beside it
  // Fault injection: milliseconds between the flushed temporary file and the
  // rename, so a crash test can kill inside a write (tests/kill_resume.sh).
  int pause_before_rename_ms = 0;
};

void save_checkpoint(const std::string& path, const nn::Model& model, const Executable& exe, const History& history,
                     const SaveOptions& options = {});

// A checkpoint file read and checked (its checksum, format, position against
// its history) before its tensors are matched to a model, which only the
// reader of its recorded config can build.
struct CheckpointFile {
  std::string config;     // SaveOptions::config as written
  int version = 2;        // 1: epoch boundaries only; its lr is the last epoch's, or 0 when none finished
  Checkpoint checkpoint;  // the position and history; params, state and optimizer_state empty
  io::NamedTensors tensors;
};

// Throws UserError naming `where` when the bytes fail their checksum, are
// corrupt or are no convoy checkpoint.
CheckpointFile parse_checkpoint_file(std::string_view bytes, const std::string& where);
// The metadata alone (config text, position, history; no tensors, no checksum).
CheckpointFile parse_checkpoint_file_metadata(const io::Metadata& meta, const std::string& where);
// The file's checkpoint with its tensors split into `model`'s parameters and
// state and the optimizer's state. `model` is the one the file was written
// from, its layers frozen as they were (the optimizer keeps state only for the
// parameters that trained). UserError naming `where` when a tensor is missing
// or mis-sized.
Checkpoint checkpoint_of(CheckpointFile file, const nn::Model& model, const optim::OptimizerOptions& optimizer,
                         const std::string& where);

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
  // `config`: what each checkpoint records of the run (SaveOptions::config).
  CheckpointSaver(std::string path, const nn::Model& model, std::string config,
                  CheckpointSaverOptions options = {});
  void on_train_begin(FitState& s) override;
  void on_step_end(FitState& s) override;
  void on_epoch_end(FitState& s, const EpochRecord& r) override;

 private:
  bool improved(double v) const;
  std::string path_;
  const nn::Model& model_;
  std::string config_;
  CheckpointSaverOptions options_;
  bool maximize_;
  std::optional<double> best_;
};

}  // namespace convoy::train
