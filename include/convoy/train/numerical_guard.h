#pragma once
// What the fit loop does when the numerical guard (Executable::
// last_step_finite) catches a NaN or Inf in a step's loss or gradients. The
// step itself has already changed nothing.
#include <string>

#include "convoy/train/callbacks.h"

namespace convoy::train {

enum class OnNonFinite {
  stop,       // end the fit at that step; the weights stay those of the last good step
  skip_step,  // drop that step's update, count it, go on
};

// "stop" or "skip_step"; throws UserError naming `key` otherwise.
OnNonFinite parse_on_nan(const std::string& policy, const std::string& key);

// Applies `policy` to the step that just failed the check: skip_step counts
// it in history.skipped_steps (printing a line for the first few) and returns
// true; stop records history.fault and returns false.
bool handle_nonfinite_step(const FitState& s, OnNonFinite policy, History& history);

// One line for the user about a fault: when, where, what to do.
std::string describe(const NumericalFault& fault);

}  // namespace convoy::train
