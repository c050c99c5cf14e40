// Batch slices (backends/batch_slices.h): K threads, each its own slice of
// the batch through whole steps, gradients averaged once per step. What a
// user relies on: the same training as per_op to float rounding (loss,
// gradients, input gradient, batch-norm statistics, dropout masks, metrics),
// the same bits on every rerun, a resumed run that continues bit for bit,
// and a fixed rule for when `auto` slices.
#include <omp.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "backends/batch_slices.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/nn/model.h"
#include "convoy/nn/sequential.h"
#include "test_helpers.h"

namespace convoy {
namespace {

using testing::relative_error;

// OpenMP's thread count for the test's duration (compile_cpu reads it).
class Threads {
 public:
  explicit Threads(int n) : before_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(before_); }

 private:
  int before_;
};

// Batch norm on images and vectors, dropout on both, a join-free head.
nn::Model bn_dropout_model() {
  using namespace nn;
  return Sequential({3, 12, 12}, {Conv2d{.filters = 8, .kernel = 3, .padding = 1}, BatchNorm{}, ReLU{},
                                  Dropout{.rate = 0.3f}, MaxPool2d{.kernel = 2}, Flatten{}, Dense{.units = 24},
                                  BatchNorm{}, ReLU{}, Dropout{.rate = 0.5f}, Dense{.units = 10}, LogSoftmax{}});
}

CompileOptions options(const char* parallelism, int64_t batch) {
  return {.batch_size = batch, .loss = Loss::nll, .optimizer = {.lr = 0.05f, .momentum = 0.9f},
          .input_gradient = true, .parallelism = parse_parallelism(parallelism)};
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch batch_for(const nn::Model& model, int64_t batch, uint64_t seed) {
  Rng rng(seed);
  Batch b;
  b.x.resize(static_cast<std::size_t>(batch * numel(model.input_shape())));
  for (float& v : b.x) v = rng.uniform(-1.0f, 1.0f);
  for (int64_t i = 0; i < batch; ++i) b.y.push_back(static_cast<int32_t>(rng.next_u64() % 10));
  return b;
}

struct Result {
  int64_t slices = 0;
  double loss = 0;
  std::vector<float> grads, input_grad, params, state;
  Metrics metrics;
};

// loss_and_gradients on batch 0, then `steps` training steps (batches 1..),
// then an evaluation of `eval_rows` rows.
Result run(const nn::Model& model, const char* parallelism, int64_t batch, int steps, int64_t eval_rows) {
  auto exe = compile_cpu(model, options(parallelism, batch), 7);
  Result r;
  r.slices = exe->internals().batch_slices();
  const Batch first = batch_for(model, batch, 100);
  r.loss = exe->internals().loss_and_gradients(first.x.data(), first.y.data());
  r.grads.resize(static_cast<std::size_t>(exe->internals().size(Held::parameters)));
  r.input_grad.resize(first.x.size());
  exe->internals().read(Held::gradients, r.grads);
  exe->internals().read(Held::input_gradient, r.input_grad);
  for (int s = 0; s < steps; ++s) {
    const Batch b = batch_for(model, batch, 200 + s);
    exe->train_step(b.x.data(), b.y.data());
    EXPECT_TRUE(exe->last_step_finite());
  }
  const Batch e = batch_for(model, batch, 300);
  exe->eval_step(e.x.data(), e.y.data(), eval_rows);
  r.metrics = exe->metrics(Metrics::reset);
  r.params.resize(static_cast<std::size_t>(exe->internals().size(Held::parameters)));
  r.state.resize(static_cast<std::size_t>(exe->internals().size(Held::state)));
  exe->internals().read(Held::parameters, r.params);
  exe->internals().read(Held::state, r.state);
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

void expect_close(const Result& sliced, const Result& whole, double tolerance) {
  EXPECT_NEAR(sliced.loss, whole.loss, 1e-5 * std::abs(whole.loss));
  EXPECT_LT(relative_error(sliced.grads, whole.grads), 1e-5);
  EXPECT_LT(relative_error(sliced.input_grad, whole.input_grad), 1e-5);
  EXPECT_LT(relative_error(sliced.params, whole.params), tolerance);
  EXPECT_LT(relative_error(sliced.state, whole.state), tolerance);
  EXPECT_EQ(sliced.metrics.count, whole.metrics.count);
  EXPECT_NEAR(sliced.metrics.loss_sum, whole.metrics.loss_sum, 1e-4 * std::abs(whole.metrics.loss_sum));
  EXPECT_NEAR(static_cast<double>(sliced.metrics.correct), static_cast<double>(whole.metrics.correct), 1.0);
}

TEST(BatchSlices, SeedCnnMatchesPerOpToRounding) {
  const Threads two(2);
  const nn::Model model = nn::seed_cnn();
  const Result whole = run(model, "per_op", 32, 3, 27);
  const Result sliced = run(model, "batch_slices", 32, 3, 27);
  EXPECT_EQ(omp_get_max_threads(), 2);  // the slices' single-threaded setting stayed on their threads
  EXPECT_EQ(whole.slices, 1);
  EXPECT_EQ(sliced.slices, 2);
  EXPECT_EQ(sliced.metrics.count, 3 * 32 + 27);
  expect_close(sliced, whole, 1e-4);
}

// Batch norm sees the whole batch (its statistics summed over the slices)
// and dropout drops what it would drop in the whole batch: otherwise the
// gradients would differ by far more than rounding. Four slices on however
// many cores: the rendezvous do not depend on the cores.
TEST(BatchSlices, BatchNormAndDropoutMatchPerOpToRounding) {
  const nn::Model model = bn_dropout_model();
  Result whole;
  {
    const Threads two(2);
    whole = run(model, "per_op", 32, 3, 21);
  }
  for (int threads : {2, 4}) {
    const Threads t(threads);
    const Result sliced = run(model, "batch_slices", 32, 3, 21);
    EXPECT_EQ(sliced.slices, threads);
    expect_close(sliced, whole, 1e-4);
  }
}

TEST(BatchSlices, RerunsRepeatEveryBit) {
  const Threads two(2);
  const nn::Model model = bn_dropout_model();
  const Result a = run(model, "batch_slices", 32, 4, 32), b = run(model, "batch_slices", 32, 4, 32);
  EXPECT_TRUE(same_bits(a.grads, b.grads));
  EXPECT_TRUE(same_bits(a.params, b.params));
  EXPECT_TRUE(same_bits(a.state, b.state));
  EXPECT_EQ(a.metrics.loss_sum, b.metrics.loss_sum);
}

// What a checkpoint saves and restores (parameters, state, optimizer state,
// the running metrics and the step count): the resumed run's next steps
// repeat the uninterrupted run's bits, dropout masks and metric sums included.
TEST(BatchSlices, ResumeContinuesBitForBit) {
  const Threads two(2);
  const nn::Model model = bn_dropout_model();
  auto straight = compile_cpu(model, options("batch_slices", 32), 7);
  for (int s = 0; s < 2; ++s) {
    const Batch b = batch_for(model, 32, 200 + s);
    straight->train_step(b.x.data(), b.y.data());
  }
  std::vector<float> params(static_cast<std::size_t>(straight->internals().size(Held::parameters))),
      state(static_cast<std::size_t>(straight->internals().size(Held::state))),
      opt(static_cast<std::size_t>(straight->internals().size(Held::optimizer_state)));
  straight->internals().read(Held::parameters, params);
  straight->internals().read(Held::state, state);
  straight->internals().read(Held::optimizer_state, opt);
  const Metrics saved = straight->metrics(Metrics::keep_running);

  auto resumed = compile_cpu(model, options("batch_slices", 32), 7);  // the config's seed: dropout's masks derive from it
  resumed->internals().write(Held::parameters, params);
  resumed->internals().write(Held::state, state);
  resumed->internals().write(Held::optimizer_state, opt);
  resumed->internals().restore_metrics(saved);
  resumed->internals().set_steps_done(2);
  for (int s = 2; s < 4; ++s) {
    const Batch b = batch_for(model, 32, 200 + s);
    straight->train_step(b.x.data(), b.y.data());
    resumed->train_step(b.x.data(), b.y.data());
  }
  std::vector<float> a(params.size()), b(params.size());
  straight->internals().read(Held::parameters, a);
  resumed->internals().read(Held::parameters, b);
  EXPECT_TRUE(same_bits(a, b));
  const Metrics ma = straight->metrics(Metrics::reset), mb = resumed->metrics(Metrics::reset);
  EXPECT_EQ(ma.loss_sum, mb.loss_sum);
  EXPECT_EQ(ma.correct, mb.correct);
  EXPECT_EQ(ma.count, mb.count);
}

// An outer reducer (MPI replicas, each process K slices) as one replica: the
// mean over one is itself, so training must not change by a bit; it sees the
// whole gradient buffer once per step, announced before finish (a bucketing
// reducer requires that), and batch norm's sums at every rendezvous.
class OneReplica final : public GradientReducer {
 public:
  void ready(std::span<float> g) override { announced += g.size(); }
  void finish(std::span<float> g) override {
    EXPECT_EQ(announced, g.size());
    announced = 0;
    ++finishes;
  }
  std::size_t announced = 0;
  int finishes = 0;
};

TEST(BatchSlices, OuterReducersSeeTheSlicesResultOncePerRendezvous) {
  const Threads two(2);
  const nn::Model model = bn_dropout_model();
  auto plain = compile_cpu(model, options("batch_slices", 32), 7);
  auto outer = compile_cpu(model, options("batch_slices", 32), 7);
  OneReplica replica;
  int statistics_calls = 0;
  outer->internals().set_gradient_reducer(&replica);
  outer->internals().set_batch_norm_reducer([&](std::span<double>) { ++statistics_calls; });
  for (int s = 0; s < 2; ++s) {
    const Batch b = batch_for(model, 32, 200 + s);
    plain->train_step(b.x.data(), b.y.data());
    outer->train_step(b.x.data(), b.y.data());
  }
  EXPECT_EQ(replica.finishes, 2);
  EXPECT_EQ(statistics_calls, 2 * 2 * 3);  // 2 steps, 2 batch norms, 2 forward sums and 1 backward each
  std::vector<float> a(static_cast<std::size_t>(plain->internals().size(Held::parameters))), b(a.size());
  plain->internals().read(Held::parameters, a);
  outer->internals().read(Held::parameters, b);
  EXPECT_TRUE(same_bits(a, b));
}

// The rule: slices where threads > 1, a divisor K of the batch leaves at
// least 16 rows per slice and every layer is small; per_op otherwise.
TEST(BatchSlices, AutoSlicesSmallNetsWithEnoughRows) {
  const nn::Model seed = nn::seed_cnn();
  EXPECT_EQ(choose_batch_slices(seed, options("auto", 128), 2), 2);
  EXPECT_EQ(choose_batch_slices(seed, options("auto", 128), 16), 8);  // 16 rows each
  EXPECT_EQ(choose_batch_slices(seed, options("auto", 128), 1), 1);
  EXPECT_EQ(choose_batch_slices(seed, options("auto", 24), 2), 1);  // 12 rows a slice: too few
  EXPECT_EQ(choose_batch_slices(seed, options("auto", 127), 2), 1);  // no divisor
  EXPECT_EQ(choose_batch_slices(seed, options("per_op", 128), 2), 1);
  EXPECT_EQ(choose_batch_slices(seed, options("batch_slices", 24), 2), 2);  // forced: any divisor
  EXPECT_EQ(choose_batch_slices(seed, options("batch_slices", 127), 2), 1);
  using namespace nn;
  // ~14 GFLOP per step and thread in each convolution: splitting ops pays.
  const Model wide = Sequential({64, 32, 32}, {Conv2d{.filters = 64, .kernel = 3, .padding = 1}, ReLU{},
                                               Conv2d{.filters = 64, .kernel = 3, .padding = 1}, GlobalAvgPool{},
                                               Dense{.units = 10}, LogSoftmax{}});
  EXPECT_EQ(choose_batch_slices(wide, options("auto", 128), 2), 1);
  EXPECT_EQ(choose_batch_slices(wide, options("batch_slices", 128), 2), 2);
}

TEST(BatchSlices, MisspeltParallelismIsAUserError) {
  EXPECT_EQ(testing::error_of([] { parse_parallelism("slices"); }),
            "parallelism 'slices' is not one: use auto, per_op or batch_slices");
}

}  // namespace
}  // namespace convoy
