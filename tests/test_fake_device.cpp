// The fake device (src/backends/fake/fake_device.h) runs the CPU's kernels
// through the host path the CUDA device uses: the Program's step as queued
// work, device memory behind guard pages, captured steps replayed, the
// replicas' reducer on the stream. Being the same kernels in the same order,
// it must match the CPU device bit for bit; what it adds is the GPU's way of
// running them, and these tests hold that host logic to account on machines
// without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/fake/fake_device.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/nn/layers.h"
#include "convoy/nn/model.h"
#include "cuda_test_helpers.h"

namespace convoy {
namespace {

using namespace nn;

// A ResNet basic block (conv-BN-ReLU-conv-BN, identity add, ReLU), then
// dropout (the step count on the device picks its masks) and a classifier.
Model resnet_block() {
  GraphBuilder g({4, 8, 8});
  auto x = g.input();
  auto y = g.add(Conv2d{.filters = 4, .kernel = 3, .padding = 1, .bias = false}, x, "block.conv1");
  y = g.add(BatchNorm{}, y, "block.bn1");
  y = g.add(ReLU{}, y);
  y = g.add(Conv2d{.filters = 4, .kernel = 3, .padding = 1, .bias = false}, y, "block.conv2");
  y = g.add(BatchNorm{}, y, "block.bn2");
  auto sum = g.add(Add{}, {x, y});
  auto r = g.add(ReLU{}, sum);
  auto p = g.add(GlobalAvgPool{}, r);
  auto d = g.add(Dropout{.rate = 0.25f}, p);
  g.add(Dense{.units = 5}, d, "head");
  return g.build();
}

// The same block with everything but the head frozen (a transfer-learning
// backbone): the optimizer runs over the gathered head alone.
Model frozen_backbone() {
  Model m = resnet_block();
  m.set_trainable(false);
  m.set_trainable(true, "head");
  return m;
}

struct Case {
  const char* name;
  Model model;
  optim::OptimizerOptions optimizer;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"seed CNN, SGD", seed_cnn(), {.lr = 0.01f, .momentum = 0.5f}});
  c.push_back({"ResNet block, Adam", resnet_block(), {.kind = optim::Kind::adam, .lr = 1e-3f, .clip_norm = 1.0f}});
  c.push_back({"frozen backbone, SGD", frozen_backbone(), {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-2f}});
  return c;
}

constexpr int64_t kBatch = 8;

struct Batches {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batches batches(const Model& m, int64_t n, uint64_t seed) {
  return {testing::uniform_values(n * kBatch * numel(m.input_shape()), seed),
          testing::class_indices(n * kBatch, m.output_shape()[0], seed + 1)};
}

CompileOptions options_for(const Case& c, int64_t steps_per_execution) {
  CompileOptions o{.batch_size = kBatch, .loss = Loss::softmax_cross_entropy, .optimizer = c.optimizer,
                   .steps_per_execution = steps_per_execution};
  if (c.model.layers().back().name.find("log_softmax") != std::string::npos) o.loss = Loss::nll;
  return o;
}

// Everything a run leaves behind, bit for bit.
void expect_same_run(const Executable& fake, const Executable& cpu, const char* what) {
  EXPECT_EQ(testing::parameters(fake), testing::parameters(cpu)) << what;
  EXPECT_EQ(testing::state(fake), testing::state(cpu)) << what;
  EXPECT_EQ(testing::optimizer_state(fake), testing::optimizer_state(cpu)) << what;
  EXPECT_EQ(testing::gradients(fake), testing::gradients(cpu)) << what;
}

TEST(FakeDevice, CapturedStepsMatchTheCpuDeviceBitForBit) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const int64_t n = 12;  // six chunks of two: two eager, two captured and launched, two replayed
    auto cpu = compile_cpu(c.model, options_for(c, 1), 3);
    auto fake = compile_fake(c.model, options_for(c, 2), 3);
    const Batches b = batches(c.model, n, 21);
    EXPECT_EQ(cpu->train_steps(b.x.data(), b.y.data(), n), n);
    EXPECT_EQ(fake->train_steps(b.x.data(), b.y.data(), n), n);
    EXPECT_TRUE(fake->capture_failure().empty()) << fake->capture_failure();
    const FakeDeviceCounts counts = fake_device_counts(*fake);
    EXPECT_EQ(counts.captures, 2);  // one per bank
    EXPECT_EQ(counts.replays, 4);
    expect_same_run(*fake, *cpu, "after training");
    const Metrics a = fake->metrics(Metrics::reset), e = cpu->metrics(Metrics::reset);
    EXPECT_EQ(a.count, n * kBatch);
    EXPECT_EQ(a.count, e.count);
    EXPECT_EQ(a.correct, e.correct);
    EXPECT_EQ(a.loss_sum, e.loss_sum);
    // Inference on a short batch: the rows past `count` are zeros on both.
    fake->eval_step(b.x.data(), b.y.data(), kBatch - 3);
    cpu->eval_step(b.x.data(), b.y.data(), kBatch - 3);
    EXPECT_EQ(testing::output(*fake), testing::output(*cpu));
    EXPECT_EQ(fake->metrics(Metrics::reset).loss_sum, cpu->metrics(Metrics::reset).loss_sum);
  }
}

// Dense target rows travel in their own part of each slot and take their
// own captures (the key includes the target kind).
TEST(FakeDevice, DenseTargetsTakeTheirOwnCaptures) {
  const Case c = cases()[1];
  auto cpu = compile_cpu(c.model, options_for(c, 1), 3);
  auto fake = compile_fake(c.model, options_for(c, 2), 3);
  const int64_t n = 8, classes = c.model.output_shape()[0];
  const Batches b = batches(c.model, n, 30);
  std::vector<float> rows(static_cast<std::size_t>(n * kBatch * classes), 0.0f);
  for (std::size_t i = 0; i < b.y.size(); ++i) rows[i * classes + b.y[i]] = 1.0f;
  fake->train_steps(b.x.data(), b.y.data(), n);
  cpu->train_steps(b.x.data(), b.y.data(), n);
  fake->train_steps(b.x.data(), Targets::rows(rows.data()), n);
  cpu->train_steps(b.x.data(), Targets::rows(rows.data()), n);
  EXPECT_EQ(fake_device_counts(*fake).captures, 4);  // two banks x two target kinds
  expect_same_run(*fake, *cpu, "class indices, then target rows");
}

TEST(FakeDevice, GradientsAndInputGradientsMatchTheCpuDevice) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    CompileOptions o = options_for(c, 1);
    o.input_gradient = true;
    auto cpu = compile_cpu(c.model, o, 5);
    auto fake = compile_fake(c.model, o, 5);
    const Batches b = batches(c.model, 1, 8);
    EXPECT_EQ(fake->internals().loss_and_gradients(b.x.data(), b.y.data()),
              cpu->internals().loss_and_gradients(b.x.data(), b.y.data()));
    EXPECT_EQ(testing::gradients(*fake), testing::gradients(*cpu));
    std::vector<float> gf(kBatch * numel(c.model.input_shape())), gc(gf.size());
    fake->internals().read(Held::input_gradient, gf);
    cpu->internals().read(Held::input_gradient, gc);
    EXPECT_EQ(gf, gc);
  }
}

// The first CUDA fault: a capture that fails with a gradient reducer
// bound must fall back to eager steps. The reducer saw half a step's buckets
// during the capture; unless the Program makes it forget them, the eager
// step's finish() counts them too and aborts the process.
TEST(FakeDevice, AFailedCaptureWithAReducerFallsBackToEagerSteps) {
  const Case c = cases()[0];
  const int64_t layers = static_cast<int64_t>(c.model.layers().size());
  // Work of a step: guard, input, the forwards, the loss, then backward:
  // fail a few items into it, after the first buckets went out.
  const FakeDeviceOptions fail{.fail_capture_at = 2 + layers + 1 + 5};
  auto fake = compile_fake(c.model, options_for(c, 2), 3, fail);
  FakeGroupReducer reducer(/*bucket_floats=*/64);
  fake->internals().set_gradient_reducer(&reducer);
  auto cpu = compile_cpu(c.model, options_for(c, 1), 3);
  const int64_t n = 8;
  const Batches b = batches(c.model, n, 4);
  EXPECT_EQ(fake->train_steps(b.x.data(), b.y.data(), n), n);  // aborted here before the fix
  cpu->train_steps(b.x.data(), b.y.data(), n);
  EXPECT_NE(fake->capture_failure().find("on purpose"), std::string::npos) << fake->capture_failure();
  const FakeDeviceCounts counts = fake_device_counts(*fake);
  EXPECT_EQ(counts.failed_captures, 1);
  EXPECT_EQ(counts.captures, 0);
  EXPECT_EQ(counts.replays, 0);
  EXPECT_GT(reducer.collectives_run(), 0);
  // Every gradient went through the reducer once per step that ran.
  EXPECT_EQ(reducer.floats_run(), n * fake->internals().size(Held::parameters));
  expect_same_run(*fake, *cpu, "eager after the failed capture");
}

// What a collective counts must advance when captured steps replay (the
// issue's second fault, NCCL's marks baked into a graph): the fake reducer
// counts on the stream, so replays count as often as eager steps do.
TEST(FakeDevice, ReplayedStepsRunTheReducersWorkEveryTime) {
  const Case c = cases()[1];
  auto eager = compile_fake(c.model, options_for(c, 1), 3);
  auto captured = compile_fake(c.model, options_for(c, 2), 3);
  FakeGroupReducer once(64), every(64);
  eager->internals().set_gradient_reducer(&once);
  captured->internals().set_gradient_reducer(&every);
  const Batches b = batches(c.model, 12, 6);
  eager->train_steps(b.x.data(), b.y.data(), 1);
  const int64_t per_step = once.collectives_run();
  ASSERT_GT(per_step, 1);  // several buckets: the test means something
  captured->train_steps(b.x.data(), b.y.data(), 12);
  EXPECT_EQ(fake_device_counts(*captured).replays, 4);
  EXPECT_EQ(every.collectives_run(), 12 * per_step);
  EXPECT_EQ(every.floats_run(), 12 * captured->internals().size(Held::parameters));
}

// The check StepsInOneCudaGraphEqualSingleSteps lacked: steps that fall back
// to eager execution give the same numbers, so equality alone cannot tell
// that nothing was captured. capture_failure() and the counts can.
TEST(FakeDevice, ASilentCaptureFailureIsVisible) {
  const Case c = cases()[0];
  auto fake = compile_fake(c.model, options_for(c, 2), 3, {.fail_capture_at = 1});
  auto cpu = compile_cpu(c.model, options_for(c, 1), 3);
  const Batches b = batches(c.model, 8, 9);
  fake->train_steps(b.x.data(), b.y.data(), 8);
  cpu->train_steps(b.x.data(), b.y.data(), 8);
  expect_same_run(*fake, *cpu, "eager steps");      // the numbers cannot tell ...
  EXPECT_FALSE(fake->capture_failure().empty());   // ... this can
  EXPECT_EQ(fake_device_counts(*fake).replays, 0);
}

// A non-finite batch inside a captured chunk: the guard on the device halts
// the rest of the chunk, as the CPU stops after the faulty step.
TEST(FakeDevice, TheGuardHaltsACapturedChunkAtTheFaultyStep) {
  const Case c = cases()[0];
  auto fake = compile_fake(c.model, options_for(c, 2), 3);
  auto cpu = compile_cpu(c.model, options_for(c, 1), 3);
  Batches b = batches(c.model, 8, 10);
  const int64_t example = numel(c.model.input_shape());
  b.x[(5 * kBatch + 1) * example] = std::numeric_limits<float>::quiet_NaN();  // batch 5 of 8: second of chunk 3
  EXPECT_EQ(fake->train_steps(b.x.data(), b.y.data(), 8), 6);
  EXPECT_EQ(cpu->train_steps(b.x.data(), b.y.data(), 8), 6);
  EXPECT_FALSE(fake->last_step_finite());
  EXPECT_EQ(fake->internals().nonfinite_report(), "the input batch (check the data)");
  EXPECT_EQ(fake->internals().nonfinite_report(), cpu->internals().nonfinite_report());
  EXPECT_EQ(testing::parameters(*fake), testing::parameters(*cpu));
  EXPECT_EQ(testing::state(*fake), testing::state(*cpu));
  EXPECT_EQ(fake->metrics(Metrics::keep_running).count, 5 * kBatch);
}

TEST(FakeDevice, ProfilingRunsTheSameStepWithTimestamps) {
  const Case c = cases()[1];
  auto fake = compile_fake(c.model, options_for(c, 2), 3);
  auto cpu = compile_cpu(c.model, options_for(c, 1), 3);
  fake->internals().set_profiling(true);
  const Batches b = batches(c.model, 4, 12);
  fake->train_steps(b.x.data(), b.y.data(), 4);
  cpu->train_steps(b.x.data(), b.y.data(), 4);
  EXPECT_EQ(fake->internals().profiled_steps(), 4);
  EXPECT_EQ(fake_device_counts(*fake).captures, 0);  // profiled steps are never captured
  for (const LayerProfile& p : fake->internals().profile()) EXPECT_GE(p.forward_seconds, 0) << p.name;
  EXPECT_EQ(testing::parameters(*fake), testing::parameters(*cpu));
}

// A span of the wrong size is refused before any copy, naming what the
// executable holds first ("expected") and what the caller gave ("got").
TEST(FakeDevice, CopiesOfTheWrongSizeSayWhatWasExpected) {
  auto fake = compile_fake(seed_cnn(), {.batch_size = 2}, 1);
  auto cpu = compile_cpu(seed_cnn(), {.batch_size = 2}, 1);
  const std::string count = std::to_string(fake->internals().size(Held::parameters));
  for (Executable* e : {static_cast<Executable*>(fake.get()), cpu.get()}) {
    std::vector<float> short_by_one(static_cast<std::size_t>(e->internals().size(Held::parameters) - 1));
    EXPECT_EQ(testing::error_of([&] { e->internals().read(Held::parameters, short_by_one); }),
              "parameters: expected room for " + count + " values, got " + std::to_string(short_by_one.size()));
    EXPECT_EQ(testing::error_of([&] { e->internals().write(Held::parameters, short_by_one); }),
              "parameters: expected " + count + " values, got " + std::to_string(short_by_one.size()));
  }
}

TEST(FakeDeviceDeathTest, ACopyPastTheEndOfDeviceMemoryCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto fake = compile_fake(seed_cnn(), {.batch_size = 2}, 1);
  auto* p = static_cast<float*>(fake_device_allocate(*fake, 40));
  p[15] = 1.0f;  // inside (40 bytes round up to 64)
  EXPECT_DEATH(p[16] = 2.0f, "");
}

}  // namespace
}  // namespace convoy
