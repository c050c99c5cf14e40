#pragma once
// Settings a run would ignore: one line each, so that nothing is silent.
#include <set>
#include <string>
#include <vector>

#include "convoy/config/run_config.h"

namespace convoy::train {

// The keys of `given` (set by a file, --set or a flag) that the chosen
// optimizer, model or data do not read, each as one line saying which and
// what reads it ("optimizer.beta1 is ignored: sgd has no beta1 (adam, adamw
// read it)").
std::vector<std::string> ignored_settings(const RunConfig& config, const std::set<std::string>& given);

}  // namespace convoy::train
