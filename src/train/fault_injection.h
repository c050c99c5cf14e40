#pragma once
// Fault-injection hooks for the CLI's crash tests (tests/kill_resume.sh,
// tests/resume.sh, tests/graceful_stop.sh), read from the environment by the
// application layer only: the library's training loop and checkpoint writer
// take them as plain options and never read the environment themselves.
//   CONVOY_TEST_STEP_DELAY_MS        each training step sleeps this long after
//                                    it runs, so a test killing runs at random
//                                    instants sees the same run length on a
//                                    fast idle machine as on a loaded one;
//   CONVOY_TEST_CHECKPOINT_DELAY_MS  each checkpoint write pauses this long
//                                    between its flushed temporary file and
//                                    the rename (kills land inside writes).
#include <memory>

#include "convoy/train/callbacks.h"

namespace convoy::train {

struct FaultInjection {
  int step_delay_ms = 0;
  int checkpoint_pause_ms = 0;
  static FaultInjection from_environment();
};

// Sleeps step_delay_ms per training step (a GPU execution of n steps sleeps n
// times as long); nullptr when there is no delay.
std::shared_ptr<Callback> step_pacer(int step_delay_ms);

}  // namespace convoy::train
