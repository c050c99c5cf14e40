#pragma once
// Stopping a run gracefully. While a StopSignals lives, the first SIGINT or
// SIGTERM only sets a flag (async-signal-safe); StopOnSignal turns it into
// FitState::interrupted after the step in progress, so the fit stops there and
// the CheckpointSaver writes the position. A second SIGINT/SIGTERM exits at
// once with 128 + signal (130 / 143), as an impatient user expects.
#include "convoy/train/callbacks.h"

namespace convoy::train {

class StopSignals {
 public:
  StopSignals();   // installs the handlers, remembering the previous ones
  ~StopSignals();  // puts the previous ones back
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  // The first signal received while installed (SIGINT or SIGTERM), or 0.
  static int received();
  static void reset();  // forget a received signal (tests)
};

class StopOnSignal : public Callback {
 public:
  void on_step_end(FitState& s) override;
};

// "SIGINT", "SIGTERM", ...
const char* signal_name(int signal);

}  // namespace convoy::train
