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

// Divergence: finite values can blow up too (a learning rate of 1e30 makes
// weights ~1e29 and losses ~1e32, never NaN). After each step the watch
// compares the step's mean loss with a running level of the earlier steps'
// (an exponential average); one above kDivergenceFactor x max(level, 1)
// ends the fit under either on_nan policy, since its update cannot be taken
// back. Cross-entropy that high means the true class got e^-100 or less: no
// healthy run gets there.
inline constexpr double kDivergenceFactor = 100;

class DivergenceWatch {
 public:
  // The running sums at the start of an epoch (or of its resumed part).
  void restart(const Metrics& running) { before_ = running; }
  // The running sums after the latest steps; true when their mean loss diverged.
  bool diverged(const Metrics& running);
  double last_loss() const { return last_; }
  double level() const { return level_; }

 private:
  Metrics before_;
  double level_ = -1, last_ = 0;
};
// Records the fault of a diverged step in history.fault.
void record_divergence(const FitState& s, const DivergenceWatch& watch, History& history);

// One line for the user about a fault: when, where, what to do.
std::string describe(const NumericalFault& fault);

}  // namespace convoy::train
