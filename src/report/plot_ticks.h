#pragma once
// Private to io/: where a chart's axis puts its ticks.
#include <string>
#include <vector>

namespace convoy::report {

// Ticks on round values covering [lo, hi]: a step of 1, 2, 2.5 or 5 x 10^k
// (what plotting libraries choose), the first tick at or below lo and the
// last at or above hi, at most about `max_ticks` of them. The axis spans from
// the first to the last tick, so every value lies within it.
struct Ticks {
  std::vector<double> values;
  double step = 1;
  // A tick's label with as many decimals as the step needs (2.5 -> "2.5", 0.05 -> "0.05").
  std::string label(double v) const;
};
Ticks nice_ticks(double lo, double hi, int max_ticks = 6);

}  // namespace convoy::report
