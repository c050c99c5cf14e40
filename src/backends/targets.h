#pragma once
// Host-side checks of a batch's targets, shared by the backends so that every
// backend refuses the same mistakes with the same words.
#include <cstdint>

#include "convoy/backends/executable.h"

namespace convoy {

// Throws UserError for a class index outside [0, cols).
void check_label(int32_t label, int64_t cols);
// Throws UserError when no targets are given, or when binary cross-entropy
// gets class indices.
void check_target_kind(Loss loss, Targets targets);
// Both checks over a batch of `rows` targets.
void check_targets(Loss loss, Targets targets, int64_t rows, int64_t cols);

}  // namespace convoy
