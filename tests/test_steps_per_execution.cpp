// steps_per_execution on any backend: train_steps(n) is n train_step calls,
// and fit with N batches per execution trains exactly as fit with one, calling
// batch callbacks once per execution (the GPU side: test_cuda_training.cpp).
#include <gtest/gtest.h>

#include "convoy/train/fit.h"
#include "cuda_test_helpers.h"

namespace convoy {
namespace {

using namespace nn;

TEST(StepsPerExecution, TrainStepsIsNTrainStepCalls) {
  const Model model({2, 6, 6}, {Conv2d{.filters = 3, .kernel = 3}, ReLU{}, Flatten{}, Dense{.units = 4}});
  const int64_t batch = 5, n = 3, example = 2 * 6 * 6;
  const CompileOptions options{.batch_size = batch, .loss = Loss::softmax_cross_entropy,
                               .optimizer = {.lr = 0.1f, .momentum = 0.9f}};
  auto a = compile_cpu(model, options, 2), b = compile_cpu(model, options, 2);
  const auto x = testing::uniform_values(n * batch * example, 1);
  const auto y = testing::class_indices(n * batch, 4, 2);
  a->train_steps(x.data(), y.data(), n);
  for (int64_t i = 0; i < n; ++i) b->train_step(x.data() + i * batch * example, y.data() + i * batch);
  EXPECT_EQ(testing::parameters(*a), testing::parameters(*b));
  const Metrics ma = a->metrics(Metrics::reset), mb = b->metrics(Metrics::reset);
  EXPECT_EQ(ma.count, n * batch);
  EXPECT_EQ(ma.loss_sum, mb.loss_sum);
  EXPECT_EQ(ma.correct, mb.correct);

  std::vector<float> rows(n * batch * 4, 0.25f);  // dense targets step through their rows too
  a->train_steps(x.data(), Targets::rows(rows.data()), n);
  for (int64_t i = 0; i < n; ++i) b->train_step(x.data() + i * batch * example, Targets::rows(rows.data() + i * batch * 4));
  EXPECT_EQ(testing::parameters(*a), testing::parameters(*b));
}

struct CountBatchCallbacks : train::Callback {
  std::vector<int64_t> steps;
  void on_batch_end(train::FitState&, int64_t step, const Metrics& running) override {
    steps.push_back(step);
    EXPECT_GT(running.count, 0);
  }
};

TEST(StepsPerExecution, FitTrainsTheSameAndCallsBackPerExecution) {
  data::LabeledImages train{Tensor(DType::f32, {7 * 8 + 3, 1, 8, 8}), Tensor(DType::i32, {7 * 8 + 3})};
  const auto x = testing::uniform_values(train.images.numel(), 3);
  std::copy(x.begin(), x.end(), train.images.data<float>().begin());
  const auto y = testing::class_indices(train.size(), 3, 4);
  std::copy(y.begin(), y.end(), train.labels.data<int32_t>().begin());
  const Model model({1, 8, 8}, {Conv2d{.filters = 2, .kernel = 3}, BatchNorm{}, ReLU{}, Flatten{}, Dense{.units = 3}});
  const CompileOptions options{.batch_size = 8, .loss = Loss::softmax_cross_entropy,
                               .optimizer = {.lr = 0.05f, .momentum = 0.5f}, .steps_per_execution = 3};
  auto run = [&](int64_t steps_per_execution, std::vector<int64_t>* steps) {
    auto exe = compile_cpu(model, options, 5);
    auto counter = std::make_shared<CountBatchCallbacks>();
    const train::History h = train::fit(*exe, train, train,
                                        {.epochs = 2, .seed = 9, .steps_per_execution = steps_per_execution,
                                         .callbacks = {counter}});
    if (steps) *steps = counter->steps;
    auto p = testing::parameters(*exe);
    const auto s = testing::state(*exe);
    p.insert(p.end(), s.begin(), s.end());
    p.push_back(static_cast<float>(h.epochs.back().train_loss));
    p.push_back(static_cast<float>(h.epochs.back().test_loss));
    return p;
  };
  std::vector<int64_t> steps;
  EXPECT_EQ(run(3, &steps), run(1, nullptr));  // bit for bit
  // 7 batches per epoch in executions of 3, 3 and 1.
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 6, 7, 3, 6, 7}));
}

}  // namespace
}  // namespace convoy
