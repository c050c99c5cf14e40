#pragma once
// Learning-rate schedules (per epoch, as Keras's LearningRateScheduler) and
// ReduceLROnPlateau.
#include <cstdint>
#include <string>

#include "convoy/train/callbacks.h"

namespace convoy::train {

// kind: "constant"; "step" (x gamma every step_epochs); "cosine" (from the
// base rate down to min_lr over the run); "one_cycle" (up to max_lr over the
// first 30% of epochs, then cosine down to min_lr). warmup_epochs > 0 ramps
// any of them linearly from base/warmup_epochs up over the first epochs.
struct ScheduleOptions {
  std::string kind = "constant";
  int64_t step_epochs = 10;
  double gamma = 0.1;
  double min_lr = 0;
  double max_lr = 0.1;
  int64_t warmup_epochs = 0;
  bool active() const { return kind != "constant" || warmup_epochs > 0; }
};
void validate(const ScheduleOptions& s);

// The rate for epoch `epoch` (1-based) of `epochs`, from the base rate.
double scheduled_lr(const ScheduleOptions& s, double base_lr, int64_t epoch, int64_t epochs);

class LearningRateScheduler : public Callback {
 public:
  LearningRateScheduler(ScheduleOptions s, double base_lr) : s_(std::move(s)), base_(base_lr) {}
  void on_epoch_begin(FitState& st) override;

 private:
  ScheduleOptions s_;
  double base_;
};

// Multiplies the rate by `factor` when `monitor` has not improved for
// `patience` epochs, never below min_lr.
struct ReduceLrOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;
  int64_t patience = 10;
  double min_lr = 0;
  double min_delta = 1e-4;
};

class ReduceLrOnPlateau : public Callback {
 public:
  explicit ReduceLrOnPlateau(ReduceLrOptions o);
  void on_train_begin(FitState&) override;
  void on_epoch_end(FitState& st, const EpochRecord& r) override;

 private:
  bool observe(double value);  // true when a reduction is due
  ReduceLrOptions o_;
  bool maximize_;
  double best_ = 0;
  int64_t wait_ = 0;
};

}  // namespace convoy::train
