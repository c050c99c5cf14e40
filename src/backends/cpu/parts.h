#pragma once
// Cutting a range into register-sized parts: a kernel whose tile holds at
// most `most` rows (or vectors) takes `total` of them as the fewest
// near-equal parts rather than full tiles and a short last one, so no tile
// is padded with rows that are computed and dropped.
#include <cstdint>

namespace convoy::cpu {

// Calls fn(first, count) for `total` items cut into the fewest near-equal
// parts of at most `most` (the shorter parts first), in ascending order.
template <class Fn>
void for_parts(int64_t total, int64_t most, Fn&& fn) {
  const int64_t parts = (total + most - 1) / most;
  for (int64_t i = 0, first = 0; i < parts; ++i) {
    const int64_t count = (total - first) / (parts - i);
    fn(first, count);
    first += count;
  }
}

}  // namespace convoy::cpu
