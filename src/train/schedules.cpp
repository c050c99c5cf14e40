#include "convoy/train/schedules.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::train {

void validate(const ScheduleOptions& s) {
  require(s.kind == "constant" || s.kind == "step" || s.kind == "cosine" || s.kind == "one_cycle",
          "schedule.kind: '" + shown(s.kind) + "' is not constant, step, cosine or one_cycle");
  require(s.step_epochs >= 1, "schedule.step_epochs must be at least 1");
  require(s.gamma > 0, "schedule.gamma must be positive");
  require(s.min_lr >= 0 && s.max_lr > 0, "schedule.min_lr must be 0 or more and max_lr positive");
  require(s.warmup_epochs >= 0, "schedule.warmup_epochs must be 0 or more");
}

double scheduled_lr(const ScheduleOptions& s, double base, int64_t epoch, int64_t epochs) {
  const double e = static_cast<double>(epoch - 1), total = static_cast<double>(std::max<int64_t>(epochs, 1));
  auto cosine = [](double from, double to, double t) { return to + (from - to) * 0.5 * (1 + std::cos(M_PI * t)); };
  double lr = base;
  if (s.kind == "step") lr = base * std::pow(s.gamma, std::floor(e / static_cast<double>(s.step_epochs)));
  if (s.kind == "cosine") lr = cosine(base, s.min_lr, e / total);
  if (s.kind == "one_cycle") {
    const double rise = std::max(1.0, std::round(0.3 * total));
    lr = e < rise ? base + (s.max_lr - base) * e / rise
                  : cosine(s.max_lr, s.min_lr, (e - rise) / std::max(1.0, total - rise));
  }
  if (epoch <= s.warmup_epochs) lr *= static_cast<double>(epoch) / static_cast<double>(s.warmup_epochs);
  return lr;
}

void LearningRateScheduler::on_epoch_begin(FitState& st) {
  st.exe.set_learning_rate(static_cast<float>(scheduled_lr(s_, base_, st.epoch, st.epochs)));
}

ReduceLrOnPlateau::ReduceLrOnPlateau(ReduceLrOptions o) : o_(std::move(o)) {
  check_metric_name(o_.monitor, "reduce_lr_on_plateau.monitor");
  require(o_.factor > 0 && o_.factor < 1, "reduce_lr_on_plateau.factor must be in (0, 1)");
  require(o_.patience >= 0 && o_.min_lr >= 0, "reduce_lr_on_plateau.patience and min_lr must be 0 or more");
  maximize_ = o_.monitor.find("acc") != std::string::npos;
}

bool ReduceLrOnPlateau::observe(double v) {
  const double d = std::abs(o_.min_delta);
  if (maximize_ ? v > best_ + d : v < best_ - d) {
    best_ = v;
    wait_ = 0;
    return false;
  }
  if (++wait_ <= o_.patience) return false;
  wait_ = 0;
  return true;
}

void ReduceLrOnPlateau::on_train_begin(FitState& st) {
  best_ = maximize_ ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  wait_ = 0;
  // A resumed run replays its earlier epochs (the rate itself comes back from
  // the checkpoint), so later reductions fall where an uninterrupted run's do.
  for (const auto& r : st.history.epochs) observe(metric_value(r, o_.monitor));
}

void ReduceLrOnPlateau::on_epoch_end(FitState& st, const EpochRecord& r) {
  if (!observe(metric_value(r, o_.monitor))) return;
  const double lr = std::max(o_.min_lr, st.exe.learning_rate() * o_.factor);
  if (lr < st.exe.learning_rate()) {
    st.exe.set_learning_rate(static_cast<float>(lr));
    char line[160];
    std::snprintf(line, sizeof line, "has not improved for %lld epochs; learning rate now %g",
                  static_cast<long long>(o_.patience), lr);
    warn(st, "convoy: " + o_.monitor + " " + line);
  }
}

}  // namespace convoy::train
