#pragma once
// What compile_pjrt refuses before it starts (needs no plugin, so the
// emitter tests check it in every build).
#include <string>

#include "convoy/backends/executable.h"

namespace convoy::pjrt {

// Empty when the PJRT device can train `model` with `options`; else one line
// saying what is missing.
std::string pjrt_unsupported(const nn::Model& model, const CompileOptions& options);

}  // namespace convoy::pjrt
