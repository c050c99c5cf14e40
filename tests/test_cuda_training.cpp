// Whole models on the GPU against the CPU backend (fp32, TF32 off): the seed
// CNN's loss and gradients, optimizer steps, a residual graph, the zoo's
// EfficientNets (uneven "same" padding, squeeze-and-excitation, dropout) and
// transfer learning's frozen backbones; and the GPU's own promises: N steps
// in one CUDA graph equal N single steps, and fit with steps_per_execution
// trains as the CPU does. Skipped without a usable GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <variant>

#include "backends/program.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/nn/zoo.h"
#include "convoy/train/fit.h"
#include "cuda_test_helpers.h"
#include "joins_graph.h"

namespace convoy {
namespace {

using namespace nn;
using testing::relative_error;

constexpr double kTolerance = 1e-4;

// A batch of the seed CNN's input: pixels normalised as Fashion-MNIST's (x in
// [0, 1], then (x - 0.1307) / 0.3081), so activations have realistic scales.
std::vector<float> seed_images(int64_t batch, uint64_t seed) {
  auto x = testing::uniform_values(batch * 28 * 28, seed, 0, 1);
  for (float& v : x) v = (v - 0.1307f) / 0.3081f;
  return x;
}

TEST(CudaTraining, SeedCnnLossAndGradientsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Model model = seed_cnn();
  const int64_t batch = 32;
  auto [cpu, gpu] = testing::compile_both(model, {.batch_size = batch, .loss = Loss::nll}, 5);
  const auto x = seed_images(batch, 1);
  const auto y = testing::class_indices(batch, 10, 2);
  const double want = cpu->internals().loss_and_gradients(x.data(), y.data());
  const double got = gpu->internals().loss_and_gradients(x.data(), y.data());
  EXPECT_NEAR(got, want, kTolerance * want);
  EXPECT_LT(relative_error(testing::output(*gpu), testing::output(*cpu)), kTolerance);
  testing::expect_per_tensor(model, testing::gradients(*gpu), testing::gradients(*cpu), kTolerance, "gradient");
  EXPECT_LT(relative_error(testing::state(*gpu), testing::state(*cpu)), kTolerance);
}

struct OptimizerCase {
  const char* name;
  optim::OptimizerOptions options;
};

TEST(CudaTraining, OptimizerStepsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const OptimizerCase cases[] = {
      {"sgd, the seed's", {.lr = 0.01f, .momentum = 0.5f}},
      {"sgd nesterov + weight decay", {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f, .nesterov = true}},
      {"sgd clipped", {.lr = 0.05f, .momentum = 0.9f, .clip_norm = 0.05f}},
      {"adam", {.kind = optim::Kind::adam, .lr = 1e-3f, .weight_decay = 1e-4f}},
      {"adamw clipped", {.kind = optim::Kind::adamw, .lr = 1e-3f, .weight_decay = 1e-2f, .clip_norm = 0.1f}},
      {"rmsprop with momentum", {.kind = optim::Kind::rmsprop, .lr = 1e-3f, .momentum = 0.5f}},
  };
  const Model model = seed_cnn();
  const int64_t batch = 16;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto [cpu, gpu] = testing::compile_both(model, {.batch_size = batch, .loss = Loss::nll, .optimizer = c.options}, 9);
    for (int step = 0; step < 3; ++step) {
      const auto x = seed_images(batch, 10 + step);
      const auto y = testing::class_indices(batch, 10, 20 + step);
      cpu->train_step(x.data(), y.data());
      gpu->train_step(x.data(), y.data());
    }
    testing::expect_per_tensor(model, testing::parameters(*gpu), testing::parameters(*cpu), kTolerance, "parameter");
    EXPECT_LT(relative_error(testing::optimizer_state(*gpu), testing::optimizer_state(*cpu)), kTolerance);
    EXPECT_LT(relative_error(testing::state(*gpu), testing::state(*cpu)), kTolerance);
    // The clipped gradients are left in the gradient buffer on both.
    testing::expect_per_tensor(model, testing::gradients(*gpu), testing::gradients(*cpu), kTolerance, "gradient");
    const Metrics want = cpu->metrics(Metrics::reset), got = gpu->metrics(Metrics::reset);
    EXPECT_EQ(got.count, 3 * batch);
    EXPECT_EQ(got.correct, want.correct);
    EXPECT_NEAR(got.loss_sum, want.loss_sum, kTolerance * want.loss_sum);
    // A new learning rate reaches the device (and captured graphs).
    cpu->set_learning_rate(c.options.lr / 10);
    gpu->set_learning_rate(c.options.lr / 10);
    const auto x = seed_images(batch, 99);
    const auto y = testing::class_indices(batch, 10, 98);
    cpu->train_step(x.data(), y.data());
    gpu->train_step(x.data(), y.data());
    testing::expect_per_tensor(model, testing::parameters(*gpu), testing::parameters(*cpu), kTolerance,
                               "parameter after a learning-rate change");
  }
}

using testing::joins_graph;

TEST(CudaTraining, ResidualGraphMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const Model model = joins_graph();
  const int64_t batch = 6;
  auto [cpu, gpu] = testing::compile_both(
      model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy, .optimizer = {.lr = 0.1f, .momentum = 0.9f},
              .input_gradient = true},
      3);
  const auto x = testing::uniform_values(batch * 3 * 8 * 8, 7);
  const auto y = testing::class_indices(batch, 5, 8);
  const double want = cpu->internals().loss_and_gradients(x.data(), y.data());
  EXPECT_NEAR(gpu->internals().loss_and_gradients(x.data(), y.data()), want, kTolerance * want);
  // conv2d_0's bias feeds batch norm: its true gradient is 0 and both sides
  // hold rounding noise, so it is compared against the whole gradient's scale.
  const auto g_cpu = testing::gradients(*cpu), g_gpu = testing::gradients(*gpu);
  EXPECT_LT(relative_error(g_gpu, g_cpu), kTolerance);
  for (const auto& layer : model.layers())
    for (const auto& slot : layer.params)
      if (slot.name != "conv2d_0.bias") {
        EXPECT_LT(relative_error({g_gpu.data() + slot.offset, static_cast<std::size_t>(slot.size())},
                                 {g_cpu.data() + slot.offset, static_cast<std::size_t>(slot.size())}),
                  kTolerance)
            << slot.name;
      }
  std::vector<float> dx_cpu(x.size()), dx_gpu(x.size());
  cpu->internals().read(Held::input_gradient, dx_cpu);
  gpu->internals().read(Held::input_gradient, dx_gpu);
  EXPECT_LT(relative_error(dx_gpu, dx_cpu), kTolerance) << "input gradient (summed over the fan-out)";
  for (int step = 0; step < 2; ++step) {
    cpu->train_step(x.data(), y.data());
    gpu->train_step(x.data(), y.data());
  }
  EXPECT_LT(relative_error(testing::parameters(*gpu), testing::parameters(*cpu)), kTolerance);
}

// n steps through train_steps (one captured CUDA graph per n) against n
// train_step calls on an executable that never captures. cuDNN may pick other
// (equally exact) algorithms for the two, hence a tolerance, not bits.
TEST(CudaTraining, StepsInOneCudaGraphEqualSingleSteps) {
  SKIP_WITHOUT_GPU();
  const Model model = seed_cnn();
  const int64_t batch = 32, n = 5;
  CompileOptions options{.batch_size = batch, .loss = Loss::nll, .optimizer = {.lr = 0.01f, .momentum = 0.5f},
                         .steps_per_execution = 4};
  options.gpu.tf32 = false;
  auto graphed = testing::compile_gpu(model, options, 4);
  options.gpu.graphs = false;
  options.steps_per_execution = 1;
  auto single = testing::compile_gpu(model, options, 4);
  const auto x = seed_images(batch * n, 11);
  const auto y = testing::class_indices(batch * n, 10, 12);
  for (int round = 0; round < 2; ++round) {  // the second round replays the captured graphs
    graphed->train_steps(x.data(), y.data(), n);  // chunks of 4 and 1
    for (int64_t i = 0; i < n; ++i) single->train_step(x.data() + i * batch * 28 * 28, y.data() + i * batch);
  }
  // Steps that fell back to eager execution give the same numbers: only the
  // program can say whether graphs were captured at all.
  if (!testing::cpu_as_gpu()) {
    auto& program = dynamic_cast<Program&>(*graphed);
    EXPECT_EQ(program.capture_failure(), "");
    EXPECT_EQ(program.captures(), 2);  // chunks of 4 and of 1, each captured on its second run
  }
  EXPECT_LT(relative_error(testing::parameters(*graphed), testing::parameters(*single)), 1e-5);
  EXPECT_LT(relative_error(testing::state(*graphed), testing::state(*single)), 1e-5);
  const Metrics a = graphed->metrics(Metrics::reset), b = single->metrics(Metrics::reset);
  EXPECT_EQ(a.count, 2 * n * batch);
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.correct, b.correct);
  EXPECT_NEAR(a.loss_sum, b.loss_sum, 1e-5 * b.loss_sum);
  // Dense targets take their own graph.
  std::vector<float> rows(batch * n * 10, 0.0f);
  for (int64_t i = 0; i < batch * n; ++i) rows[i * 10 + y[i]] = 1.0f;
  graphed->train_steps(x.data(), Targets::rows(rows.data()), n);
  single->train_steps(x.data(), Targets::rows(rows.data()), n);
  EXPECT_LT(relative_error(testing::parameters(*graphed), testing::parameters(*single)), 1e-5);
}

data::LabeledImages random_images(int64_t count, uint64_t seed) {
  data::LabeledImages d{Tensor(DType::f32, {count, 1, 28, 28}), Tensor(DType::i32, {count})};
  const auto x = seed_images(count, seed);
  std::copy(x.begin(), x.end(), d.images.data<float>().begin());
  const auto y = testing::class_indices(count, 10, seed + 1);
  std::copy(y.begin(), y.end(), d.labels.data<int32_t>().begin());
  return d;
}

// fit with steps_per_execution 4 on the GPU (executions of 4 batches as CUDA
// graphs, and a shorter one at each epoch's end) trains as fit on the CPU.
TEST(CudaTraining, FitWithStepsPerExecutionMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const auto train = random_images(10 * 32 + 7, 1), test = random_images(50, 2);
  CompileOptions options{.batch_size = 32, .loss = Loss::nll, .optimizer = {.lr = 0.01f, .momentum = 0.5f},
                         .steps_per_execution = 4};
  auto [cpu, gpu] = testing::compile_both(seed_cnn(), options, 6);
  const train::History want = train::fit(*cpu, train, test, {.epochs = 2, .seed = 3});
  const train::History got = train::fit(*gpu, train, test, {.epochs = 2, .seed = 3, .steps_per_execution = 4});
  ASSERT_EQ(got.epochs.size(), 2u);
  EXPECT_EQ(got.images_trained, 2 * 10 * 32);
  for (std::size_t e = 0; e < 2; ++e) {
    EXPECT_NEAR(got.epochs[e].train_loss, want.epochs[e].train_loss, kTolerance * want.epochs[e].train_loss);
    EXPECT_NEAR(got.epochs[e].test_loss, want.epochs[e].test_loss, kTolerance * want.epochs[e].test_loss);
    EXPECT_DOUBLE_EQ(got.epochs[e].test_accuracy, want.epochs[e].test_accuracy);
  }
  EXPECT_LT(relative_error(testing::parameters(*gpu), testing::parameters(*cpu)), kTolerance);
}

TEST(CudaTraining, ProfileTimesEveryLayer) {
  SKIP_WITHOUT_GPU();
  auto gpu = testing::compile_gpu(seed_cnn(), {.batch_size = 16}, 1);
  gpu->internals().set_profiling(true);
  const auto x = seed_images(16, 1);
  const auto y = testing::class_indices(16, 10, 2);
  gpu->train_step(x.data(), y.data());
  gpu->train_step(x.data(), y.data());
  EXPECT_EQ(gpu->internals().profiled_steps(), 2);
  const auto p = gpu->internals().profile();
  ASSERT_EQ(p.size(), seed_cnn().layers().size());
  EXPECT_EQ(p[0].name, "conv2d_0");
  EXPECT_GT(p[0].forward_seconds, 0);
  EXPECT_GT(p[0].backward_seconds, 0);
}

// The numerical guard inside a CUDA graph: a batch of NaNs in the middle of
// an execution ends train_steps at that step, changes nothing (weights, BN
// statistics, metrics), and the steps before it are those the CPU takes.
TEST(CudaTraining, ANonFiniteStepInsideAGraphChangesNothingAndEndsTheCall) {
  SKIP_WITHOUT_GPU();
  const nn::Model model = nn::seed_cnn();
  const int64_t batch = 8, n = 4;
  const CompileOptions options{.batch_size = batch, .loss = Loss::nll, .optimizer = {.lr = 0.05f, .momentum = 0.5f},
                               .steps_per_execution = n};
  auto [cpu, gpu] = testing::compile_both(model, options, 5);
  const int64_t per = numel(model.input_shape());
  std::vector<float> x = testing::uniform_values(n * batch * per, 8);
  const std::vector<int32_t> y = testing::class_indices(n * batch, 10, 9);
  std::fill(x.begin() + 2 * batch * per, x.begin() + 3 * batch * per, std::nanf(""));  // step 3 of 4
  for (int round = 0; round < 2; ++round) {  // the second replays the captured graph
    SCOPED_TRACE(round);
    const int64_t want = cpu->train_steps(x.data(), y.data(), n), got = gpu->train_steps(x.data(), y.data(), n);
    EXPECT_EQ(want, 3);
    EXPECT_EQ(got, want);
    EXPECT_FALSE(gpu->last_step_finite());
    EXPECT_NE(gpu->internals().nonfinite_report(), "");
    EXPECT_LT(testing::relative_error(testing::parameters(*gpu), testing::parameters(*cpu)), 1e-3);
    EXPECT_LT(testing::relative_error(testing::state(*gpu), testing::state(*cpu)), 1e-3);
    const Metrics mc = cpu->metrics(Metrics::reset), mg = gpu->metrics(Metrics::reset);
    EXPECT_EQ(mg.count, mc.count);
    EXPECT_EQ(mg.count, 2 * batch);
    EXPECT_NEAR(mg.loss_sum, mc.loss_sum, 1e-3 * std::abs(mc.loss_sum));
  }
  // The rest of the execution, handed in again (on_nan: skip_step), trains.
  EXPECT_EQ(gpu->train_steps(x.data() + 3 * batch * per, y.data() + 3 * batch, 1), 1);
  EXPECT_TRUE(gpu->last_step_finite());
}

// Zoo networks end to end: loss, outputs and gradients of one step, then
// parameters and running statistics after SGD steps (two of them in one
// CUDA graph), with dropout (the head's, rate 0.2) drawing the CPU's masks.
// tf_efficientnet_lite0 pads its stride-2 convolutions unevenly (TensorFlow's
// "same"), efficientnet_b0 gates with squeeze-and-excitation. Training-mode
// batch norm over few values per channel makes deep networks ill-conditioned
// (docs/zoo.md: PyTorch's own fp32 and fp64 gradients differ by up to 1e-3
// per tensor there), so single tensors get 2e-3; the whole gradient 1e-4.
TEST(CudaTraining, EfficientNetsTrainAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t batch = 8;
  for (const char* name : {"tf_efficientnet_lite0", "efficientnet_b0"}) {
    SCOPED_TRACE(name);
    const Model model = nn::model_by_name(name, {.input = {3, 64, 64}, .classes = 5});
    const CompileOptions options{.batch_size = batch, .loss = Loss::softmax_cross_entropy,
                                 .optimizer = {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 1e-4f},
                                 .steps_per_execution = 2};
    auto [cpu, gpu] = testing::compile_both(model, options, 31);
    const auto x = testing::uniform_values(2 * batch * 3 * 64 * 64, 32);
    const auto y = testing::class_indices(2 * batch, 5, 33);
    const double want = cpu->internals().loss_and_gradients(x.data(), y.data());
    EXPECT_NEAR(gpu->internals().loss_and_gradients(x.data(), y.data()), want, kTolerance * want);
    EXPECT_LT(relative_error(testing::output(*gpu), testing::output(*cpu)), kTolerance) << "logits";
    const auto g_cpu = testing::gradients(*cpu), g_gpu = testing::gradients(*gpu);
    EXPECT_LT(relative_error(g_gpu, g_cpu), kTolerance) << "the whole gradient";
    testing::expect_per_tensor(model, g_gpu, g_cpu, 2e-3, "gradient");
    for (int round = 0; round < 2; ++round) {  // eager, then captured
      cpu->train_step(x.data(), y.data());
      gpu->train_step(x.data(), y.data());
      EXPECT_EQ(cpu->train_steps(x.data(), y.data(), 2), 2);
      EXPECT_EQ(gpu->train_steps(x.data(), y.data(), 2), 2);
    }
    EXPECT_LT(relative_error(testing::parameters(*gpu), testing::parameters(*cpu)), kTolerance) << "parameters";
    testing::expect_per_tensor(model, testing::parameters(*gpu), testing::parameters(*cpu), 2e-3, "parameter");
    EXPECT_LT(relative_error(testing::state(*gpu), testing::state(*cpu)), kTolerance) << "running statistics";
    EXPECT_LT(relative_error(testing::optimizer_state(*gpu), testing::optimizer_state(*cpu)), 2e-3) << "momentum";
    const Metrics m_cpu = cpu->metrics(Metrics::reset), m_gpu = gpu->metrics(Metrics::reset);
    EXPECT_EQ(m_gpu.count, 6 * batch);
    EXPECT_NEAR(m_gpu.loss_sum, m_cpu.loss_sum, kTolerance * m_cpu.loss_sum);
  }
}

// Transfer learning's two phases on tf_efficientnet_lite0 (docs/transfer.md):
// the head alone on a frozen backbone, then every layer but the batch norms
// (which then stay frozen among trainable convolutions: many runs of
// trainable parameters). Frozen weights and all running statistics stay bit
// for bit what they were, the trainable ones train as on the CPU, and the
// optimizer keeps state for the trainable parameters only.
TEST(CudaTraining, FrozenLayersStayBitIdenticalAndTheRestTrainsAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t batch = 8;
  Model head_only = nn::tf_efficientnet_lite0({.input = {3, 64, 64}, .classes = 4});
  head_only.set_trainable(false);
  head_only.set_trainable(true, "classifier");
  Model fine_tune = nn::tf_efficientnet_lite0({.input = {3, 64, 64}, .classes = 4});
  for (const auto& layer : fine_tune.layers())
    if (std::holds_alternative<BatchNorm>(layer.layer)) fine_tune.set_trainable(false, layer.name);
  struct Case {
    const char* name;
    const Model& model;
    optim::OptimizerOptions optimizer;
  };
  // Weight decay and momentum would move a frozen weight with a zero gradient.
  const Case cases[] = {
      {"head only, SGD", head_only, {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-2f, .clip_norm = 1.0f}},
      {"fine-tune with frozen batch norms, SGD", fine_tune, {.lr = 0.01f, .momentum = 0.9f, .weight_decay = 1e-3f}},
      {"head only, AdamW", head_only, {.kind = optim::Kind::adamw, .lr = 1e-3f, .weight_decay = 1e-2f}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Model& model = c.model;
    const CompileOptions options{.batch_size = batch, .loss = Loss::softmax_cross_entropy, .optimizer = c.optimizer,
                                 .steps_per_execution = 2};
    auto [cpu, gpu] = testing::compile_both(model, options, 41);
    const std::vector<float> initial = testing::parameters(*gpu);
    int64_t trainable = 0;
    for (const auto& layer : model.layers())
      for (const auto& slot : layer.params) trainable += layer.trainable ? slot.size() : 0;
    EXPECT_EQ(gpu->internals().size(Held::optimizer_state), cpu->internals().size(Held::optimizer_state));
    EXPECT_EQ(gpu->internals().size(Held::optimizer_state), optim::state_size(c.optimizer, trainable));

    const auto x = testing::uniform_values(2 * batch * 3 * 64 * 64, 42);
    const auto y = testing::class_indices(2 * batch, 4, 43);
    for (int round = 0; round < 2; ++round) {  // eager, then captured
      cpu->train_step(x.data(), y.data());
      gpu->train_step(x.data(), y.data());
      EXPECT_EQ(cpu->train_steps(x.data(), y.data(), 2), 2);
      EXPECT_EQ(gpu->train_steps(x.data(), y.data(), 2), 2);
    }
    const std::vector<float> after = testing::parameters(*gpu), want = testing::parameters(*cpu);
    for (const auto& layer : model.layers())
      for (const auto& slot : layer.params) {
        const std::span<const float> got_slot(after.data() + slot.offset, static_cast<std::size_t>(slot.size())),
            start(initial.data() + slot.offset, static_cast<std::size_t>(slot.size())),
            want_slot(want.data() + slot.offset, static_cast<std::size_t>(slot.size()));
        if (!layer.trainable) {
          EXPECT_TRUE(std::equal(got_slot.begin(), got_slot.end(), start.begin())) << slot.name << " moved";
          continue;
        }
        EXPECT_FALSE(std::equal(got_slot.begin(), got_slot.end(), start.begin())) << slot.name << " did not train";
        EXPECT_LT(relative_error(got_slot, want_slot), kTolerance) << slot.name;
      }
    EXPECT_EQ(testing::state(*gpu), model.initial_state()) << "a frozen batch norm leaves its statistics alone";
    EXPECT_LT(relative_error(testing::optimizer_state(*gpu), testing::optimizer_state(*cpu)), kTolerance);
    const std::vector<float> grads = testing::gradients(*gpu);
    for (const auto& layer : model.layers()) {
      if (layer.trainable) continue;
      for (const auto& slot : layer.params) {
        EXPECT_TRUE(std::all_of(grads.begin() + slot.offset, grads.begin() + slot.offset + slot.size(),
                                [](float g) { return g == 0.0f; }))
            << slot.name << " has a gradient";
      }
    }
  }
}

}  // namespace
}  // namespace convoy
