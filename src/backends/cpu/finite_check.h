#pragma once
// NaN/Inf checks for the numerical guard: one cheap pass over a flat buffer
// every step, and a scan that names the first non-finite buffer of a step
// only after a fault was found.
#include <span>
#include <string>
#include <vector>

namespace convoy::cpu {

// True when no value is NaN or infinite (tests exponent bits: vectorises).
bool all_finite(std::span<const float> values);

struct NamedValues {
  std::string what;  // e.g. "the forward output of conv2d_0"
  std::span<const float> values;
};

// The `what` of the first entry holding a NaN or Inf; "" when none does.
std::string first_nonfinite(const std::vector<NamedValues>& in_order);

}  // namespace convoy::cpu
