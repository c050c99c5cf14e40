#include "report/plot_ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace convoy::report {

Ticks nice_ticks(double lo, double hi, int max_ticks) {
  if (!(std::isfinite(lo) && std::isfinite(hi)) || lo > hi) lo = 0, hi = 1;
  if (hi - lo < 1e-12 * std::max(1.0, std::abs(hi))) {  // one value: a unit of its own size around it
    const double half = lo == 0 ? 0.5 : 0.1 * std::abs(lo);
    lo -= half;
    hi += half;
  }
  const int intervals = std::max(1, max_ticks - 1);
  const double raw = (hi - lo) / intervals;
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  Ticks t;
  // The smallest round step that covers the range in at most `intervals` steps
  // (rounding lo down and hi up may need one more than raw suggests).
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0, 20.0}) {
    t.step = m * decade;
    const double first = std::floor(lo / t.step + 1e-9) * t.step, last = std::ceil(hi / t.step - 1e-9) * t.step;
    if ((last - first) / t.step <= intervals + 1e-9) break;
  }
  const double first = std::floor(lo / t.step + 1e-9), last = std::ceil(hi / t.step - 1e-9);
  for (double k = first; k <= last + 1e-9; k += 1) t.values.push_back(k * t.step);
  return t;
}

std::string Ticks::label(double v) const {
  // Decimals the step needs: 0 for 1, 2, 5, 10; 1 for 2.5 or 0.5; 2 for 0.25 or 0.05 ...
  int decimals = 0;
  for (double s = step; decimals < 10 && std::abs(s - std::round(s)) > 1e-6 * std::max(1.0, s); s *= 10) ++decimals;
  if (std::abs(v) < step * 1e-9) v = 0;  // no "-0"
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

}  // namespace convoy::report
