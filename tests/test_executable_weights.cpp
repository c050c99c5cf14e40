// The public Executable's weights as one value (Executable::weights and
// set_weights): what a library user relies on to carry a model from one
// compile to another; what it says it was compiled for; reading its metrics
// with and without a reset; the internals' refusal to write what a step computes;
// and where a compile runs as compile options (DeviceChoice →
// CompileOptions::gpu.index / pjrt.plugin), not a process-wide switch.
#include <gtest/gtest.h>
#include <omp.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/nn/layers.h"
#include "convoy/nn/sequential.h"
#include "test_helpers.h"

namespace convoy {
namespace {

nn::Model small_cnn() {
  return nn::Sequential({1, 6, 6}, {nn::Conv2d{.filters = 3, .kernel = 3}, nn::BatchNorm{}, nn::ReLU{}, nn::Flatten{},
                                    nn::Dense{.units = 4}, nn::LogSoftmax{}});
}

CompileOptions momentum(int64_t batch = 4) {
  return {.batch_size = batch, .optimizer = {.lr = 0.05f, .momentum = 0.9f}};
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch batch(uint64_t seed, int64_t rows = 4) {
  Rng rng(seed);
  Batch b{std::vector<float>(static_cast<std::size_t>(rows * 36)),
          std::vector<int32_t>(static_cast<std::size_t>(rows))};
  for (float& v : b.x) v = rng.uniform(-1, 1);
  for (int32_t& v : b.y) v = static_cast<int32_t>(rng.below(4));
  return b;
}

void train(Executable& exe, int steps, uint64_t seed) {
  for (int s = 0; s < steps; ++s) {
    const Batch b = batch(seed + s);
    exe.train_step(b.x.data(), b.y.data());
  }
}

TEST(ExecutableWeights, HoldEveryPartAtItsSize) {
  auto exe = compile_cpu(small_cnn(), momentum(), 3);
  const Weights w = exe->weights();
  EXPECT_EQ(static_cast<int64_t>(w.parameters.size()), small_cnn().num_parameters());
  EXPECT_EQ(static_cast<int64_t>(w.state.size()), small_cnn().num_state());
  EXPECT_EQ(static_cast<int64_t>(w.optimizer_state.size()), exe->internals().size(Held::optimizer_state));
  EXPECT_GT(w.optimizer_state.size(), 0u) << "momentum keeps a velocity";
  EXPECT_EQ(w.parameters, exe->internals().copy_of(Held::parameters));
}

// Weights, state and optimizer state moved to a fresh compile continue the
// training bit for bit.
TEST(ExecutableWeights, CarryTrainingToAnotherCompileExactly) {
  auto straight = compile_cpu(small_cnn(), momentum(), 3);
  train(*straight, 3, 100);
  auto moved = compile_cpu(small_cnn(), momentum(), 99);  // other initial weights
  moved->set_weights(straight->weights());
  train(*straight, 2, 200);
  train(*moved, 2, 200);
  const Weights a = straight->weights(), b = moved->weights();
  EXPECT_TRUE(a.parameters == b.parameters);
  EXPECT_TRUE(a.state == b.state);
  EXPECT_TRUE(a.optimizer_state == b.optimizer_state);
}

// A part left empty stays as it was: weights without optimizer state (as
// from a weights file) keep the fresh compile's zero velocity.
TEST(ExecutableWeights, LeaveEmptyPartsAsTheyWere) {
  auto trained = compile_cpu(small_cnn(), momentum(), 3);
  train(*trained, 2, 100);
  auto fresh = compile_cpu(small_cnn(), momentum(), 99);
  const Weights before = fresh->weights();
  Weights w = trained->weights();
  w.optimizer_state.clear();
  fresh->set_weights(w);
  const Weights after = fresh->weights();
  EXPECT_EQ(after.parameters, w.parameters);
  EXPECT_EQ(after.state, w.state);
  EXPECT_EQ(after.optimizer_state, before.optimizer_state);
}

TEST(ExecutableWeights, OfTheWrongSizeAreRefusedNamingThePart) {
  auto exe = compile_cpu(small_cnn(), momentum(), 3);
  Weights w = exe->weights();
  w.state.push_back(0);
  EXPECT_EQ(
      testing::error_of([&] { exe->set_weights(w); }),
      "state: expected " + std::to_string(small_cnn().num_state()) + " values, got " + std::to_string(w.state.size()));
}

// One value for what fit, predict and a user size their buffers by; batch
// slices report the whole batch, not a slice's.
TEST(ExecutableFace, SaysWhatItWasCompiledFor) {
  CompileOptions o = momentum(8);
  o.steps_per_execution = 3;  // the CPU still takes one batch at a time
  const CompiledFor c = compile_cpu(small_cnn(), o, 3)->compiled_for();
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.batch_size, 8);
  EXPECT_EQ(c.input_size, 36);
  EXPECT_EQ(c.output_size, 4);
  EXPECT_EQ(c.steps_per_call, 1);

  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  o.parallelism = Parallelism::batch_slices;
  auto sliced = compile_cpu(small_cnn(), o, 3);
  omp_set_num_threads(threads);
  ASSERT_EQ(sliced->internals().batch_slices(), 2);
  EXPECT_EQ(sliced->compiled_for().batch_size, 8);
  EXPECT_EQ(sliced->compiled_for().input_size, 36);
  EXPECT_EQ(sliced->compiled_for().output_size, 4);
}

TEST(ExecutableFace, MetricsKeepRunningUntilReset) {
  auto exe = compile_cpu(small_cnn(), momentum(), 3);
  train(*exe, 2, 100);
  const Metrics running = exe->metrics(Metrics::keep_running);
  EXPECT_EQ(running.count, 8);
  EXPECT_GT(running.loss_sum, 0);
  EXPECT_EQ(exe->metrics(Metrics::keep_running).loss_sum, running.loss_sum);
  const Metrics taken = exe->metrics(Metrics::reset);
  EXPECT_EQ(taken.count, 8);
  EXPECT_EQ(taken.loss_sum, running.loss_sum);
  EXPECT_EQ(taken.correct, running.correct);
  const Metrics after = exe->metrics(Metrics::keep_running);
  EXPECT_EQ(after.count, 0);
  EXPECT_EQ(after.loss_sum, 0);
  train(*exe, 1, 300);
  EXPECT_EQ(exe->metrics(Metrics::reset).count, 4);
}

TEST(ExecutableInternals, ComputedBuffersCannotBeWritten) {
  auto exe = compile_cpu(small_cnn(), momentum(), 3);
  const std::vector<float> g = exe->internals().copy_of(Held::gradients);
  EXPECT_THROW(exe->internals().write(Held::gradients, g), std::invalid_argument);
}

// Where to run travels in the device choice and the compile options, not
// in a process-wide switch: the GPU asked about is the one checked, and a
// PJRT compile opens the plugin its choice names.
TEST(DeviceChoice, AsksAboutTheGpuItIsGiven) {
  EXPECT_EQ(choose_device("cpu", 3).kind, DeviceKind::cpu);
  const GpuReport& far = find_gpus(63);  // no machine has 64 GPUs
  EXPECT_FALSE(far.usable());
  EXPECT_FALSE(far.why_unusable.empty());
  EXPECT_THROW(choose_device("cuda", 63), UserError);
  EXPECT_THROW(find_gpus(-1), UserError);
}

TEST(DeviceChoice, CompilesWithThePluginItNames) {
  const DeviceChoice pjrt{.kind = DeviceKind::pjrt, .pjrt_plugin = "/no/such/pjrt_plugin.so"};
  const std::string error = testing::error_of([&] { compile_on(pjrt, small_cnn(), momentum(), 3); });
#ifdef CONVOY_PJRT_RUNTIME
  EXPECT_NE(error.find("/no/such/pjrt_plugin.so"), std::string::npos) << error;
#else
  EXPECT_NE(error.find("no PJRT backend"), std::string::npos) << error;
#endif
  const DeviceChoice cpu{.kind = DeviceKind::cpu, .gpu = 5, .pjrt_plugin = "/no/such/pjrt_plugin.so"};
  EXPECT_EQ(compile_on(cpu, small_cnn(), momentum(), 3)->compiled_for().device, "cpu");  // the CPU ignores both
}

}  // namespace
}  // namespace convoy
