#include "convoy/train/numerical_guard.h"

#include <cstdio>

#include "convoy/core/error.h"

namespace convoy::train {
namespace {

constexpr int64_t kSkipsPrinted = 10;  // after these, skips are only counted (summary.json: skipped_steps)

}  // namespace

OnNonFinite parse_on_nan(const std::string& policy, const std::string& key) {
  if (policy == "stop") return OnNonFinite::stop;
  if (policy == "skip_step") return OnNonFinite::skip_step;
  throw UserError(key + ": '" + policy + "' is not stop or skip_step");
}

std::string describe(const NumericalFault& f) {
  return "NaN or Inf at epoch " + std::to_string(f.epoch) + " step " + std::to_string(f.step) + ", first in " +
         f.where;
}

bool handle_nonfinite_step(const FitState& s, OnNonFinite policy, History& history) {
  const NumericalFault fault{.epoch = s.epoch, .step = s.step, .where = s.exe.nonfinite_report()};
  if (policy == OnNonFinite::stop) {
    history.fault = fault;
    return false;
  }
  if (++history.skipped_steps <= kSkipsPrinted)
    std::fprintf(stderr, "convoy: %s; update skipped (on_nan: skip_step)%s\n", describe(fault).c_str(),
                 history.skipped_steps == kSkipsPrinted ? "; further skips are only counted" : "");
  return true;
}

}  // namespace convoy::train
