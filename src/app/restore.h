#pragma once
// Private to app/: a checkpoint's model compiled with its weights, ready
// for inference (evaluate, predict). Defined in run.cpp, beside the
// compilation a run uses.
#include <memory>

#include "convoy/backends/executable.h"
#include "convoy/app/run_checkpoint.h"

namespace convoy::train {

std::unique_ptr<Executable> restore(const RunCheckpoint& ck);

}  // namespace convoy::train
