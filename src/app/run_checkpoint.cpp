// A run's checkpoints (run_checkpoint.h): train's checkpoint file, its
// recorded config read as a RunConfig, and the model that config builds
// matched to the file's tensors.
#include "convoy/app/run_checkpoint.h"

#include <filesystem>

#include "convoy/core/error.h"
#include "convoy/core/path_kind.h"
#include "convoy/core/untrusted.h"
#include "config/transfer.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

// The file's run config, and what only it allows to complete and check: a
// version-1 file with no finished epoch trains at the config's rate, and no
// position lies past the run's epochs.
RunConfig config_of(CheckpointFile& f, const std::string& where) {
  RunConfig config = parse_run_config(f.config, where + " (config)", /*yaml=*/false);
  Checkpoint& c = f.checkpoint;
  if (f.version == 1) {
    if (c.history.epochs.empty()) c.lr = static_cast<float>(config.lr);
  } else {
    require(c.epoch <= config.epochs,
            where + ": checkpoint position does not match its history; the checkpoint is corrupt");
  }
  return config;
}

}  // namespace

RunCheckpoint parse_checkpoint_metadata(const io::Metadata& meta, const std::string& where) {
  CheckpointFile f = parse_checkpoint_file_metadata(meta, where);
  RunConfig config = config_of(f, where);
  return {std::move(f.checkpoint), std::move(config)};
}

RunCheckpoint parse_checkpoint(std::string_view bytes, const std::string& where) {
  CheckpointFile f = parse_checkpoint_file(bytes, where);
  RunConfig config = config_of(f, where);
  nn::Model model = build_model(config, model_input_shape(config), model_classes(config));
  // The optimizer keeps state for the parameters that trained when the
  // checkpoint was written (transfer learning freezes some).
  const std::vector<Phase> phases = phases_of(config);
  set_phase_layers(model, config, phases[phase_at(phases, f.checkpoint.epoch)].frozen);
  Checkpoint c = checkpoint_of(std::move(f), model, optimizer_options(config), where);
  return {std::move(c), std::move(config)};
}

RunCheckpoint load_checkpoint(const std::string& path) {
  return parse_checkpoint(read_file_bounded(path, kMaxModelBytes, "checkpoint"), path);
}

RunCheckpoint load_latest_checkpoint(const std::string& dir, std::ostream& warn) {
  const std::string latest = (fs::path(dir) / kCheckpointFile).string();
  const std::string previous = (fs::path(dir) / kPreviousCheckpointFile).string();
  // With error codes: a link loop or an unreadable folder is the user's to fix, not an internal error.
  const bool a_file = path_kind(dir) == "a file";
  require_folder(dir, "", a_file && fs::path(dir).extension() == ".safetensors"
                              ? "pass the folder that holds it (the --out folder of a convoy train run)"
                              : "pass the --out folder of a convoy train run");
  std::error_code ec;
  const bool has_latest = fs::exists(latest, ec), has_previous = fs::exists(previous, ec);
  require(has_latest || has_previous,
          dir + ": no " + kCheckpointFile + " here; pass the --out folder of a convoy train run");
  std::string latest_problem = latest + " is missing";
  if (has_latest) {
    try {
      return load_checkpoint(latest);
    } catch (const UserError& e) {
      if (!has_previous) throw;
      latest_problem = e.what();
    }
  }
  try {
    RunCheckpoint c = load_checkpoint(previous);
    warn << "convoy: warning: " << latest_problem << "; using the previous checkpoint, " << kPreviousCheckpointFile
         << std::endl;
    return c;
  } catch (const UserError& e) {
    throw UserError(dir + ": no usable checkpoint (" + latest_problem + "; " + e.what() + ")");
  }
}

}  // namespace convoy::train
