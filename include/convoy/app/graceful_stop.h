#pragma once
// Stopping on SIGINT/SIGTERM. One handler serves two scopes:
//  - While a StopSignals lives (a fit), the first SIGINT or SIGTERM only sets
//    a flag (async-signal-safe); StopOnSignal turns it into
//    FitState::interrupted after the step in progress, so the fit stops there
//    and the CheckpointSaver writes the position.
//  - Anywhere else while an ExitOnSignals lives (the CLI's commands: data
//    loading, compiling, the final evaluation and reports, predict), and for
//    a second signal inside a fit, the handler writes one line and ends the
//    process at once with _exit(128 + signal) (130 / 143). Never exit(): that
//    would run static destructors while the input pipeline's, the pool's or
//    OpenMP's threads still use what they destroy. Outputs are written to a
//    temporary file and renamed (io/atomic_file.h), so an exit at any instant
//    leaves each output whole or absent; the handler removes the temporary
//    files of the writes in progress (core/temporary_files.h)
//    before it exits.
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

class ExitOnSignals {
 public:
  ExitOnSignals();   // installs the handler for SIGINT and SIGTERM
  ~ExitOnSignals();  // puts the previous ones back
  ExitOnSignals(const ExitOnSignals&) = delete;
  ExitOnSignals& operator=(const ExitOnSignals&) = delete;
};

class StopOnSignal : public Callback {
 public:
  void on_step_end(FitState& s) override;
};

// Makes SIGINT and SIGTERM run their handlers on a thread of their own that
// does nothing else. Call it first in main, before any other thread exists:
// it blocks both signals on the calling thread, so every thread started
// later (OpenMP's, the input pipeline's, the pool's) inherits the block, and
// starts one thread that unblocks them and sleeps. Why: a handler runs on
// the stack of whichever thread the kernel picks, and oneDNN's JIT sgemm
// kernels (2.6, as Debian ships it; fixed upstream in 2026) point the stack
// pointer into a heap buffer while they run, so a handler landing on a
// thread inside one writes its signal frame over the heap. That was the
// graceful stop's rare heap corruption (docs/reliability.md, "Graceful
// stop"). Also keeps every handler off the threads that hold locks.
void take_stop_signals_on_their_own_thread();

// "SIGINT", "SIGTERM", ...
const char* signal_name(int signal);

}  // namespace convoy::train
