#pragma once
// Private to train/: the run config's `data` section (DataConfig) read from,
// and written back to, JSON.
#include <nlohmann/json.hpp>

#include "convoy/train/run_config.h"
#include "train/config_section.h"

namespace convoy::train {

// Reads data.dir and the image keys; unknown keys are left for s.finish().
void read_data_section(Section& s, RunConfig& c);
// The data section as run_config_json writes it (only dir for idx, so
// Fashion-MNIST configs stay as they were).
nlohmann::json data_section_json(const RunConfig& c);
// Range and name checks of the image keys (nothing for idx).
void validate_data(const DataConfig& d);

}  // namespace convoy::train
