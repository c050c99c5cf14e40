// A whole checkpoint file, as `convoy train --resume` and `convoy export`
// read it: safetensors, checksum, metadata, the model its config builds and
// the tensors matched to that model (parse_checkpoint). It returns a
// checkpoint whose weights fit the model and are finite, or throws
// UserError. Version-1 seeds (no checksum) let mutations reach past the
// integrity check; version-2 seeds show that a changed byte stops there.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "convoy/app/run_checkpoint.h"
#include "convoy/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const convoy::train::RunCheckpoint c =
        convoy::train::parse_checkpoint(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    // Every value came from the file: none may be more than it holds.
    if ((c.params.size() + c.state.size() + c.optimizer_state.size()) * sizeof(float) > size) __builtin_trap();
    for (float v : c.params)
      if (!std::isfinite(v)) __builtin_trap();
    if (c.epoch < 0 || c.progress.step < 0 || c.progress.metrics.correct > c.progress.metrics.count) __builtin_trap();
  } catch (const convoy::UserError&) {
  }
  return 0;
}
