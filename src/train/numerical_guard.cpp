#include "convoy/train/numerical_guard.h"

#include <algorithm>
#include <cstdio>

#include "convoy/backends/executable_internals.h"
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

bool DivergenceWatch::diverged(const Metrics& running) {
  const int64_t count = running.count - before_.count;
  if (count <= 0) return false;
  last_ = (running.loss_sum - before_.loss_sum) / static_cast<double>(count);
  before_ = running;
  if (level_ >= 0 && last_ > kDivergenceFactor * std::max(level_, 1.0)) return true;
  level_ = level_ < 0 ? last_ : 0.9 * level_ + 0.1 * last_;
  return false;
}

void record_divergence(const FitState& s, const DivergenceWatch& watch, History& history) {
  char where[160];
  std::snprintf(where, sizeof where, "a diverging loss (%.3g, over %g times its running level %.3g)",
                watch.last_loss(), kDivergenceFactor, watch.level());
  history.fault = NumericalFault{.epoch = s.epoch, .step = s.step, .where = where, .diverged = true};
}

std::string describe(const NumericalFault& f) {
  if (f.diverged)
    return "training diverged at epoch " + std::to_string(f.epoch) + " step " + std::to_string(f.step) + ": " + f.where;
  return "NaN or Inf at epoch " + std::to_string(f.epoch) + " step " + std::to_string(f.step) + ", first in " +
         f.where;
}

bool handle_nonfinite_step(const FitState& s, OnNonFinite policy, History& history) {
  const NumericalFault fault{.epoch = s.epoch, .step = s.step, .where = s.exe.internals().nonfinite_report()};
  if (policy == OnNonFinite::stop) {
    history.fault = fault;
    return false;
  }
  if (++history.skipped_steps <= kSkipsPrinted)
    warn(s, "convoy: " + describe(fault) + "; update skipped (on_nan: skip_step)" +
                (history.skipped_steps == kSkipsPrinted ? "; further skips are only counted" : ""));
  return true;
}

}  // namespace convoy::train
