#pragma once
// The size checks of an Executable's host calls (set_parameters,
// get_gradients, get_output, eval_step's count), shared by the backends so that every one
// refuses a wrong-sized span with the same words.
#include <cstdint>
#include <string>

#include "convoy/core/error.h"

namespace convoy {

// Values handed in: `what: expected N values, got M`.
inline void require_values(std::size_t got, int64_t expected, const std::string& what) {
  require(static_cast<int64_t>(got) == expected,
          what + ": expected " + std::to_string(expected) + " values, got " + std::to_string(got));
}

// Room to fill: `what: expected room for N values, got M`.
inline void require_room(std::size_t got, int64_t expected, const std::string& what) {
  require(static_cast<int64_t>(got) == expected,
          what + ": expected room for " + std::to_string(expected) + " values, got " + std::to_string(got));
}

// eval_step's `count` real rows of a batch of `batch`.
inline void require_eval_count(int64_t count, int64_t batch) {
  require(count >= 0 && count <= batch, "eval_step: count " + std::to_string(count) + " exceeds the batch size");
}

}  // namespace convoy
