#pragma once
// Models by name, for configs and checkpoints.
#include <string>

#include "convoy/nn/model.h"

namespace convoy::nn {

// Throws UserError listing the known names for an unknown one.
Model model_by_name(const std::string& name);

}  // namespace convoy::nn
