#pragma once
// A run's checkpoint as the CLI reads it: train's checkpoint (train/checkpoint.h)
// whose recorded config is the run's RunConfig, parsed, and which rebuilds
// the model the tensors belong to. Runs write it through CheckpointSaver with
// run_config_json(config) as what it records.
#include <ostream>
#include <string>
#include <string_view>

#include "convoy/config/run_config.h"
#include "convoy/io/safetensors.h"
#include "convoy/train/checkpoint.h"

namespace convoy::train {

struct RunCheckpoint : Checkpoint {
  RunConfig config;
};

// Throws UserError naming the file when it is missing, fails its checksum, is
// corrupt, or is not a checkpoint of its model's shape.
RunCheckpoint load_checkpoint(const std::string& path);
// The same from the file's bytes (`where` names them in errors).
RunCheckpoint parse_checkpoint(std::string_view bytes, const std::string& where);
// The metadata alone (config, position, history; no tensors, no checksum).
RunCheckpoint parse_checkpoint_metadata(const io::Metadata& meta, const std::string& where);

// The newest usable checkpoint in the run folder `dir`: checkpoint.safetensors,
// or, when that is missing or damaged, checkpoint.prev.safetensors after a
// one-line warning on `warn`. One UserError naming both when neither loads.
RunCheckpoint load_latest_checkpoint(const std::string& dir, std::ostream& warn);

}  // namespace convoy::train
