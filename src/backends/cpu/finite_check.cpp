#include "backends/cpu/finite_check.h"

#include <cstdint>
#include <cstring>

namespace convoy::cpu {

bool all_finite(std::span<const float> values) {
  // A float is NaN or Inf exactly when its exponent bits are all ones. An OR
  // of integer tests has no rounding order to respect, so it vectorises.
  uint32_t bad = 0;
  const float* p = values.data();
  const std::size_t n = values.size();
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

std::string first_nonfinite(const std::vector<NamedValues>& in_order) {
  for (const auto& entry : in_order)
    if (!all_finite(entry.values)) return entry.what;
  return "";
}

}  // namespace convoy::cpu
