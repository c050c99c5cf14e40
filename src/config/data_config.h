#pragma once
// Private to config/: the checks of the run config's `data` section that span
// keys (one key's range is config_schema()'s).
#include "convoy/config/run_config.h"

namespace convoy::train {

// Class weights, and for image data mean/std per channel and the kind's needs.
void validate_data(const DataConfig& d);

}  // namespace convoy::train
