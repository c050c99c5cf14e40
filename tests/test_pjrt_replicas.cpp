// Replicas inside one PJRT program (CompileOptions::pjrt, `--replicas N`) on
// XLA's CPU plugin with N devices (cpu_device_count), as the seed's 8 TPU
// cores. With synchronised batch norm, 8 replicas of batch B are one replica
// of batch 8B (the bar: updated weights within 1e-5). Without it each
// replica normalises with its own part's statistics: what the CPU backend
// computes on each part alone, gradients then averaged. Skips, saying why,
// without the plugin (bash setup.sh installs it into .peers/py). Replicas
// run on the PJRT device behind the Program (pjrt_device.h), as one replica
// does: the tests compare the two.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/pjrt/plugin.h"
#if CONVOY_PJRT_RUNTIME
#include "backends/pjrt/pjrt_device.h"
#endif
#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/nn/zoo.h"
#include "cuda_test_helpers.h"
#include "pjrt_test_helpers.h"

namespace convoy {
namespace {

using testing::gradients;
using testing::parameters;
using testing::relative_error;
using testing::state;

constexpr int kReplicas = 8;

CompileOptions sgd(int64_t batch, int replicas = 1, bool sync = false) {
  CompileOptions o;
  o.batch_size = batch;
  o.loss = Loss::nll;
  o.optimizer = {.kind = optim::Kind::sgd, .lr = 0.05f, .momentum = 0.5f};
  o.pjrt = {.replicas = replicas, .sync_batch_norm = sync};
  return o;
}

// What replicas must get right beyond the seed CNN: batch norm on images
// and on vectors, and dropout (masks drawn for the global batch, each
// replica given its rows'). Nothing whose gradient is zero but for
// rounding, which no tolerance relative to it holds: no bias right before a
// batch norm, no batch norm whose input scales with an earlier one's gamma.
nn::Model bn_dropout_graph() {
  using namespace nn;
  return Model({2, 8, 8}, {Conv2d{.filters = 4, .kernel = 3, .padding = 1, .bias = false}, BatchNorm{}, ReLU{},
                           Dropout{.rate = 0.3f}, MaxPool2d{.kernel = 2}, Flatten{}, Dense{.units = 12}, ReLU{},
                           BatchNorm{}, Dense{.units = 5}, LogSoftmax{}});
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch batch(const nn::Model& model, int64_t rows, uint64_t seed) {
  return {testing::uniform_values(rows * numel(model.input_shape()), seed),
          testing::class_indices(rows, model.output_shape()[0], seed + 1)};
}

// Each learned tensor (or running statistic) on its own, relative to its largest value.
void expect_tensors_close(const nn::Model& model, const std::vector<float>& got, const std::vector<float>& want,
                          bool running_statistics, double tol, const std::string& what) {
  for (const auto& layer : model.layers())
    for (const auto& slot : running_statistics ? layer.state : layer.params)
      EXPECT_LE(relative_error({got.data() + slot.offset, static_cast<std::size_t>(slot.size())},
                               {want.data() + slot.offset, static_cast<std::size_t>(slot.size())}),
                tol)
          << what << " of " << slot.name;
}

// 8 replicas with synchronised batch norm against one replica of the 8x
// batch, both on the PJRT backend from the same seed: gradients and outputs,
// three training steps (as single steps, and as one steps_per_execution
// loop) — weights, running statistics, velocity, metrics — and evaluation.
void expect_sync_replicas_are_one_big_batch(const nn::Model& model, int64_t part) {
  const int64_t global = part * kReplicas, example = numel(model.input_shape());
  auto one = compile_pjrt(model, sgd(global), 5);
  auto many = compile_pjrt(model, sgd(global, kReplicas, /*sync=*/true), 5);
  CompileOptions looped = sgd(global, kReplicas, true);
  looped.steps_per_execution = 3;
  auto loop = compile_pjrt(model, looped, 5);
  ASSERT_EQ(many->compiled_for().batch_size, global);
  ASSERT_EQ(parameters(*many), parameters(*one));

  const Batch b = batch(model, global, 40);
  const double loss_one = one->internals().loss_and_gradients(b.x.data(), b.y.data());
  const double loss_many = many->internals().loss_and_gradients(b.x.data(), b.y.data());
  EXPECT_NEAR(loss_many, loss_one, 1e-6 * loss_one);
  expect_tensors_close(model, gradients(*many), gradients(*one), false, 1e-5, "gradient");
  EXPECT_LT(relative_error(testing::output(*many), testing::output(*one)), 1e-5) << "outputs, in row order";
  // Back to the same start (the gradient pass moved the running statistics).
  many->internals().write(Held::state, state(*one));
  loop->internals().write(Held::state, state(*one));

  const Batch steps = batch(model, 3 * global, 50);
  for (int k = 0; k < 3; ++k) {
    one->train_step(steps.x.data() + k * global * example, steps.y.data() + k * global);
    many->train_step(steps.x.data() + k * global * example, steps.y.data() + k * global);
    ASSERT_TRUE(many->last_step_finite());
  }
  ASSERT_EQ(loop->train_steps(steps.x.data(), steps.y.data(), 3), 3);
  for (const Executable* e : {many.get(), loop.get()}) {
    SCOPED_TRACE(e == loop.get() ? "steps_per_execution 3" : "single steps");
    expect_tensors_close(model, parameters(*e), parameters(*one), false, 1e-5, "updated weight");
    expect_tensors_close(model, state(*e), state(*one), true, 1e-5, "running statistic");
    EXPECT_LT(relative_error(testing::optimizer_state(*e), testing::optimizer_state(*one)), 1e-5) << "velocity";
  }
  const Metrics m_one = one->metrics(Metrics::reset), m_many = many->metrics(Metrics::reset),
                m_loop = loop->metrics(Metrics::reset);
  EXPECT_EQ(m_many.count, 3 * global);
  EXPECT_EQ(m_loop.count, 3 * global);
  EXPECT_EQ(m_many.correct, m_one.correct);
  EXPECT_NEAR(m_many.loss_sum, m_one.loss_sum, 1e-5 * m_one.loss_sum);
  EXPECT_NEAR(m_loop.loss_sum, m_one.loss_sum, 1e-5 * m_one.loss_sum);

  // Evaluation of a short batch: the last replica's rows are all padding.
  const int64_t rows = global - part - 3;
  one->eval_step(b.x.data(), b.y.data(), rows);
  many->eval_step(b.x.data(), b.y.data(), rows);
  const Metrics e_one = one->metrics(Metrics::reset), e_many = many->metrics(Metrics::reset);
  EXPECT_EQ(e_many.count, rows);
  EXPECT_EQ(e_many.correct, e_one.correct);
  EXPECT_NEAR(e_many.loss_sum, e_one.loss_sum, 1e-5 * e_one.loss_sum);
}

TEST(PjrtReplicas, SeedCnnEightSyncReplicasAreOneReplicaOfTheEightfoldBatch) {
  REQUIRE_PJRT_DEVICES(kReplicas);
  expect_sync_replicas_are_one_big_batch(nn::seed_cnn(), 16);
}

TEST(PjrtReplicas, BatchNormAndDropoutEightSyncReplicasAreOneReplicaOfTheEightfoldBatch) {
  REQUIRE_PJRT_DEVICES(kReplicas);
  expect_sync_replicas_are_one_big_batch(bn_dropout_graph(), 4);
}

// Transfer learning on replicas: a frozen first convolution and its batch
// norm keep their weights and running statistics on every replica, and the
// rest trains as one replica of the eightfold batch.
TEST(PjrtReplicas, FrozenLayersOnEightSyncReplicasAreOneReplicaOfTheEightfoldBatch) {
  REQUIRE_PJRT_DEVICES(kReplicas);
  nn::Model model = bn_dropout_graph();
  model.set_trainable(false, model.layers()[0].name);
  model.set_trainable(false, model.layers()[1].name);
  ASSERT_FALSE(model.layers()[0].params.empty());
  auto many = compile_pjrt(model, sgd(4 * kReplicas, kReplicas, /*sync=*/true), 5);
  const auto weights_before = parameters(*many), state_before = state(*many);
  expect_sync_replicas_are_one_big_batch(model, 4);
  const Batch steps = batch(model, 2 * 4 * kReplicas, 60);
  for (int k = 0; k < 2; ++k)
    many->train_step(steps.x.data() + k * 4 * kReplicas * numel(model.input_shape()), steps.y.data() + k * 4 * kReplicas);
  const auto weights_after = parameters(*many), state_after = state(*many);
  for (int layer : {0, 1}) {
    for (const auto& slot : model.layers()[layer].params)
      for (int64_t i = slot.offset; i < slot.offset + slot.size(); ++i) ASSERT_EQ(weights_after[i], weights_before[i]) << slot.name;
    for (const auto& slot : model.layers()[layer].state)
      for (int64_t i = slot.offset; i < slot.offset + slot.size(); ++i) ASSERT_EQ(state_after[i], state_before[i]) << slot.name;
  }
  EXPECT_NE(weights_after, weights_before) << "the trainable layers trained";
}

// Without synchronised batch norm each replica normalises its own part (as
// on TPUs): the gradient is the mean of the CPU backend's on each part alone
// and the running statistics the mean of its per-part ones — not what one
// big batch gives — and it still trains.
TEST(PjrtReplicas, PerReplicaBatchNormUsesEachPartsOwnStatistics) {
  REQUIRE_PJRT_DEVICES(kReplicas);
  const nn::Model model = bn_dropout_graph();
  const int64_t part = 4, global = part * kReplicas, example = numel(model.input_shape());
  auto many = compile_pjrt(model, sgd(global, kReplicas), 9);
  auto synced = compile_pjrt(model, sgd(global, kReplicas, /*sync=*/true), 9);
  auto cpu = compile_cpu(model, sgd(part), 9);
  const std::vector<float> start = state(*cpu);
  const Batch b = batch(model, global, 60);

  const double loss = many->internals().loss_and_gradients(b.x.data(), b.y.data());
  std::vector<float> g_mean(cpu->internals().size(Held::parameters), 0.0f),
      s_mean(cpu->internals().size(Held::state), 0.0f);
  double loss_mean = 0;
  for (int r = 0; r < kReplicas; ++r) {
    cpu->internals().write(Held::state, start);
    // The global batch's dropout masks: example r * part + j at step 0 is
    // example j at step r of a batch of `part` (backends/dropout_mask.h).
    cpu->internals().set_steps_done(r);
    loss_mean +=
        cpu->internals().loss_and_gradients(b.x.data() + r * part * example, b.y.data() + r * part) / kReplicas;
    const auto g = gradients(*cpu);
    const auto s = state(*cpu);
    for (std::size_t i = 0; i < g.size(); ++i) g_mean[i] += g[i] / kReplicas;
    for (std::size_t i = 0; i < s.size(); ++i) s_mean[i] += s[i] / kReplicas;
  }
  EXPECT_NEAR(loss, loss_mean, 1e-4 * loss_mean);
  expect_tensors_close(model, gradients(*many), g_mean, false, 1e-4, "gradient (mean of the parts')");
  expect_tensors_close(model, state(*many), s_mean, true, 1e-4, "running statistic (mean of the parts')");

  // Synchronised statistics are the whole batch's: visibly other numbers.
  synced->internals().loss_and_gradients(b.x.data(), b.y.data());
  EXPECT_GT(relative_error(gradients(*synced), gradients(*many)), 1e-2) << "per-replica vs synchronised gradient";
  EXPECT_GT(relative_error(state(*synced), state(*many)), 1e-3) << "per-replica vs synchronised statistics";

  // It trains: twenty steps on one batch lower its training loss.
  many->set_learning_rate(0.2f);
  std::vector<double> losses;
  for (int k = 0; k < 20; ++k) {
    many->train_step(b.x.data(), b.y.data());
    losses.push_back(many->metrics(Metrics::reset).mean_loss());
  }
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << "first step " << losses.front() << ", last " << losses.back();
}

// A NaN in the last replica's rows: the guard's verdict is every
// replica's (the loss sums are all-reduced), so no replica changes a weight,
// and the report, scanning every replica's buffers, names the input.
TEST(PjrtReplicas, ANonFiniteRowOnOneReplicaStopsThemAllAndIsReported) {
  REQUIRE_PJRT_DEVICES(kReplicas);
  const nn::Model model = nn::seed_cnn();
  const int64_t global = 2 * kReplicas, example = numel(model.input_shape());
  auto many = compile_pjrt(model, sgd(global, kReplicas), 3);
  const std::vector<float> before = parameters(*many);
  Batch b = batch(model, global, 70);
  b.x[(global - 1) * example + 10] = NAN;
  many->train_step(b.x.data(), b.y.data());
  EXPECT_FALSE(many->last_step_finite());
  EXPECT_EQ(many->internals().nonfinite_report(), "the input batch (check the data)");
  EXPECT_EQ(parameters(*many), before);
  EXPECT_EQ(many->metrics(Metrics::reset).count, 0);
  b.x[(global - 1) * example + 10] = 0.5f;
  many->train_step(b.x.data(), b.y.data());
  EXPECT_TRUE(many->last_step_finite());
  EXPECT_NE(parameters(*many), before);
  EXPECT_EQ(many->metrics(Metrics::reset).count, global);
}

// The CPU plugin makes as many devices as replicas ask for; a program for
// more replicas than a client has devices is one line naming --replicas (a
// TPU's or GPU's chips are what they are).
TEST(PjrtReplicas, TooManyReplicasIsOneLine) {
  REQUIRE_PJRT();
  if (find_pjrt("pjrt").platform != "cpu") GTEST_SKIP() << "only XLA's CPU plugin makes devices on request";
#if CONVOY_PJRT_RUNTIME  // the plugin's client itself: absent where the runtime is left out (sanitizer builds)
  const std::string& plugin = find_pjrt("pjrt").plugin;
  pjrt::Client& standard = pjrt::Client::open(plugin);
  const int have = static_cast<int>(standard.devices().size());
  EXPECT_GE(pjrt::Client::open(plugin, have + 4).devices().size(), static_cast<std::size_t>(have + 4));
  const nn::Model model = bn_dropout_graph();
  const std::string replicas = std::to_string(have + 1);
  const std::string mlir = "module @m attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = " + replicas +
                           " : i32} {\n  func.func public @main(%a: tensor<f32>) -> tensor<f32> {\n"
                           "    func.return %a : tensor<f32>\n  }\n}\n";
  try {
    standard.compile(mlir, have + 1);
    ADD_FAILURE() << "compiled for more replicas than devices";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what, pjrt::too_few_devices(plugin, have, have + 1));
  }
  EXPECT_EQ(pjrt::too_few_devices("/x/libtpu.so", 4, 8),
            "--replicas 8: /x/libtpu.so has 4 device(s); use --replicas 4 or fewer");
  CompileOptions uneven = sgd(10, 4);
  EXPECT_THROW(compile_pjrt(model, uneven, 1), UserError) << "10 rows do not split into 4 replicas";
#endif
}

// A training step of 8 replicas is one module for 8 replicas whose
// all-reduces average the gradients, sum the loss and correct count, and
// average each batch norm's running statistics; synchronised, each batch
// norm (2) all-reduces two forward sums and one backward pair instead.
TEST(PjrtReplicas, ModulesCarryTheReplicaCountAndAllReduces) {
  REQUIRE_PJRT_DEVICES(kReplicas);
#if CONVOY_PJRT_RUNTIME
  const nn::Model model = nn::seed_cnn();
  const Batch b = batch(model, 4 * kReplicas, 3);
  auto step_module = [&](int replicas, bool sync) {
    auto e = compile_pjrt(model, sgd(4 * kReplicas, replicas, sync), 1);
    e->train_step(b.x.data(), b.y.data());
    return pjrt_last_module(*e);
  };
  auto count = [](const std::string& text) {
    std::size_t n = 0;
    for (std::size_t at = text.find("stablehlo.all_reduce"); at != std::string::npos;
         at = text.find("stablehlo.all_reduce", at + 1))
      ++n;
    return n;
  };
  const std::string per_replica = step_module(kReplicas, false);
  EXPECT_NE(per_replica.find("mhlo.num_replicas = 8"), std::string::npos);
  EXPECT_NE(per_replica.find("replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]>"), std::string::npos);
  EXPECT_EQ(count(per_replica), 1u + 1u + 2u);
  EXPECT_EQ(count(step_module(kReplicas, true)), 1u + 1u + 2u * 3u);
  const std::string one = step_module(1, false);
  EXPECT_NE(one.find("mhlo.num_replicas = 1"), std::string::npos);
  EXPECT_EQ(one.find("all_reduce"), std::string::npos);
#endif
}

}  // namespace
}  // namespace convoy
