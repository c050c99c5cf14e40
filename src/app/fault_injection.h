#pragma once
// The pacing of the CLI's crash tests (FaultInjection, run.h): the
// workflow installs it as a callback when the caller asks for it.
#include <memory>

#include "convoy/train/callbacks.h"

namespace convoy::train {

// Sleeps step_delay_ms per training step (a GPU execution of n steps sleeps n
// times as long); nullptr when there is no delay.
std::shared_ptr<Callback> step_pacer(int step_delay_ms);

// Sleeps `ms` (none when 0): FaultInjection's pauses between a run's phases.
void test_pause(int ms);

}  // namespace convoy::train
