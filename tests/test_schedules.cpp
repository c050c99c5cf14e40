#include <cmath>

#include <gtest/gtest.h>

#include "convoy/core/error.h"
#include "convoy/train/schedules.h"

namespace convoy::train {

TEST(Schedules, StepCosineOneCycleAndWarmup) {
  ScheduleOptions step{.kind = "step", .step_epochs = 2, .gamma = 0.5};
  EXPECT_DOUBLE_EQ(scheduled_lr(step, 1.0, 1, 10), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(step, 1.0, 2, 10), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(step, 1.0, 3, 10), 0.5);
  EXPECT_DOUBLE_EQ(scheduled_lr(step, 1.0, 5, 10), 0.25);

  ScheduleOptions cos{.kind = "cosine", .min_lr = 0.1};
  EXPECT_DOUBLE_EQ(scheduled_lr(cos, 1.0, 1, 10), 1.0);
  EXPECT_NEAR(scheduled_lr(cos, 1.0, 6, 10), 0.55, 1e-12);  // half way
  EXPECT_GT(scheduled_lr(cos, 1.0, 10, 10), 0.1);
  for (int e = 2; e <= 10; ++e) EXPECT_LT(scheduled_lr(cos, 1.0, e, 10), scheduled_lr(cos, 1.0, e - 1, 10));

  ScheduleOptions one{.kind = "one_cycle", .min_lr = 0.0, .max_lr = 1.0};
  EXPECT_DOUBLE_EQ(scheduled_lr(one, 0.1, 1, 10), 0.1);
  EXPECT_DOUBLE_EQ(scheduled_lr(one, 0.1, 4, 10), 1.0);  // peak after 30%
  EXPECT_LT(scheduled_lr(one, 0.1, 10, 10), 0.1);

  ScheduleOptions warm{.warmup_epochs = 4};
  EXPECT_TRUE(warm.active());
  EXPECT_DOUBLE_EQ(scheduled_lr(warm, 1.0, 1, 10), 0.25);
  EXPECT_DOUBLE_EQ(scheduled_lr(warm, 1.0, 4, 10), 1.0);
  EXPECT_DOUBLE_EQ(scheduled_lr(warm, 1.0, 5, 10), 1.0);
  EXPECT_FALSE(ScheduleOptions{}.active());
  EXPECT_THROW(validate(ScheduleOptions{.kind = "zigzag"}), UserError);
}

TEST(Schedules, ReduceLrOnPlateauCutsTheRateAfterPatience) {
  nn::Sequential model({4}, {nn::Dense{.units = 3}});
  auto exe = compile_cpu(model, {.batch_size = 2, .optimizer = {.lr = 0.1f}}, 1);
  History h;
  FitState st{.exe = *exe, .history = h, .epochs = 10};
  ReduceLrOnPlateau r({.monitor = "val_loss", .factor = 0.5, .patience = 1, .min_lr = 0.03});
  r.on_train_begin(st);
  auto epoch = [&](int64_t e, double val_loss) { r.on_epoch_end(st, {.epoch = e, .test_loss = val_loss}); };
  epoch(1, 1.0);
  epoch(2, 1.0);  // no improvement, within patience
  EXPECT_FLOAT_EQ(exe->learning_rate(), 0.1f);
  epoch(3, 1.0);  // patience exceeded
  EXPECT_FLOAT_EQ(exe->learning_rate(), 0.05f);
  epoch(4, 0.5);  // improvement resets
  epoch(5, 0.5);
  epoch(6, 0.5);
  EXPECT_FLOAT_EQ(exe->learning_rate(), 0.03f);  // floored at min_lr
  EXPECT_THROW(ReduceLrOnPlateau({.factor = 2.0}), UserError);
}

// Resumed after epoch 2 (one epoch without improvement already), the next
// flat epoch cuts the rate, as in the uninterrupted run above.
TEST(Schedules, ReduceLrOnPlateauResumedReplaysItsHistory) {
  nn::Sequential model({4}, {nn::Dense{.units = 3}});
  auto exe = compile_cpu(model, {.batch_size = 2, .optimizer = {.lr = 0.1f}}, 1);
  History h;
  h.epochs = {{.epoch = 1, .test_loss = 1.0}, {.epoch = 2, .test_loss = 1.0}};
  FitState st{.exe = *exe, .history = h, .epochs = 10};
  ReduceLrOnPlateau r({.monitor = "val_loss", .factor = 0.5, .patience = 1});
  r.on_train_begin(st);
  r.on_epoch_end(st, {.epoch = 3, .test_loss = 1.0});
  EXPECT_FLOAT_EQ(exe->learning_rate(), 0.05f);
}

}  // namespace convoy::train
