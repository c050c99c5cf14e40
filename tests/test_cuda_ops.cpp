// Every layer and loss on the GPU against the CPU backend, on the same weights
// and inputs: outputs, loss, parameter and input gradients, running
// statistics, and inference outputs and metrics, to 1e-4 relative (fp32,
// TF32 off). Each case is one layer (then Flatten where needed), so a mismatch
// names the op. Skipped without a usable GPU.
#include <gtest/gtest.h>

#include "cuda_test_helpers.h"

namespace convoy {
namespace {

using namespace nn;
using testing::relative_error;

constexpr double kTolerance = 1e-4;

struct OpCase {
  const char* name;
  Model model;
  Loss loss = Loss::softmax_cross_entropy;
  bool dense_targets = false;
  float label_smoothing = 0;
  bool input_gradient = true;
};

void check_against_cpu(const OpCase& c) {
  SCOPED_TRACE(c.name);
  const int64_t batch = 4;
  const CompileOptions options{.batch_size = batch, .loss = c.loss, .label_smoothing = c.label_smoothing,
                               .optimizer = {}, .input_gradient = c.input_gradient};
  auto [cpu, gpu] = testing::compile_both(c.model, options, 17);
  ASSERT_EQ(testing::parameters(*cpu), testing::parameters(*gpu));  // the same start

  const int64_t classes = c.model.output_shape()[0];
  const std::vector<float> x = testing::uniform_values(batch * numel(c.model.input_shape()), 3);
  const std::vector<int32_t> labels = testing::class_indices(batch, classes, 4);
  const std::vector<float> rows = testing::uniform_values(batch * classes, 5, 0, 1);
  const Targets y = c.dense_targets ? Targets::rows(rows.data()) : Targets(labels.data());

  // Training-mode forward and backward.
  const double want_loss = cpu->loss_and_gradients(x.data(), y);
  const double got_loss = gpu->loss_and_gradients(x.data(), y);
  EXPECT_NEAR(got_loss, want_loss, kTolerance * std::abs(want_loss)) << "loss";
  EXPECT_LT(relative_error(testing::output(*gpu), testing::output(*cpu)), kTolerance) << "output";
  testing::expect_per_tensor(c.model, testing::gradients(*gpu), testing::gradients(*cpu), kTolerance, "gradient");
  if (c.input_gradient) {
    std::vector<float> want(x.size()), got(x.size());
    cpu->get_input_gradient(want);
    gpu->get_input_gradient(got);
    EXPECT_LT(relative_error(got, want), kTolerance) << "input gradient";
  }
  if (c.model.num_state() > 0) {
    EXPECT_LT(relative_error(testing::state(*gpu), testing::state(*cpu)), kTolerance) << "running statistics";
  }

  // Inference on a short batch: outputs of the rows that count, and metrics.
  cpu->eval_step(x.data(), y, batch - 1);
  gpu->eval_step(x.data(), y, batch - 1);
  const std::vector<float> want_out = testing::output(*cpu), got_out = testing::output(*gpu);
  const auto rows_that_count = static_cast<std::size_t>((batch - 1) * classes);
  EXPECT_LT(relative_error({got_out.data(), rows_that_count}, {want_out.data(), rows_that_count}), kTolerance)
      << "inference output";
  const Metrics want = cpu->take_metrics(), got = gpu->take_metrics();
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_NEAR(got.loss_sum, want.loss_sum, kTolerance * std::abs(want.loss_sum)) << "inference loss";
}

TEST(CudaOps, Conv2dMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({"conv 3x3 pad 1", Model({3, 8, 8}, {Conv2d{.filters = 4, .kernel = 3, .padding = 1}, Flatten{}})});
  check_against_cpu({"conv 5x5 stride 2 pad 2",
                     Model({2, 9, 9}, {Conv2d{.filters = 3, .kernel = 5, .stride = 2, .padding = 2}, Flatten{}})});
  check_against_cpu({"conv first, no input gradient", Model({1, 12, 12}, {Conv2d{.filters = 5, .kernel = 5}, Flatten{}}),
                     Loss::softmax_cross_entropy, false, 0, false});
}

TEST(CudaOps, MaxPoolMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({"pool 2", Model({3, 8, 8}, {MaxPool2d{.kernel = 2}, Flatten{}})});
  check_against_cpu({"pool 3 stride 2 (overlapping)", Model({2, 9, 9}, {MaxPool2d{.kernel = 3, .stride = 2}, Flatten{}})});
}

TEST(CudaOps, GroupedConvAndConvWithoutBiasMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({"grouped conv (2 groups), no bias",
                     Model({4, 8, 8}, {Conv2d{.filters = 6, .kernel = 3, .padding = 1, .groups = 2, .bias = false},
                                       Flatten{}})});
  check_against_cpu({"depthwise conv, same, stride 2 (odd size)",
                     Model({3, 9, 9}, {Conv2d{.filters = 3, .kernel = 3, .stride = 2, .padding = kSame, .groups = 3},
                                       Flatten{}})});
}

TEST(CudaOps, PaddedAndAveragePoolsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({"max pool 3 stride 2 pad 1", Model({2, 8, 8}, {MaxPool2d{.kernel = 3, .stride = 2, .padding = 1},
                                                                    Flatten{}})});
  check_against_cpu({"avg pool 2", Model({3, 8, 8}, {AvgPool2d{.kernel = 2}, Flatten{}})});
  check_against_cpu({"avg pool 3 pad 1, padding counted",
                     Model({2, 7, 7}, {AvgPool2d{.kernel = 3, .stride = 1, .padding = 1}, Flatten{}})});
  check_against_cpu({"avg pool 3 pad 1, padding not counted",
                     Model({2, 7, 7}, {AvgPool2d{.kernel = 3, .stride = 1, .padding = 1, .count_include_pad = false},
                                       Flatten{}})});
  check_against_cpu({"global avg pool", Model({5, 6, 6}, {GlobalAvgPool{}})});
  check_against_cpu({"global avg pool, keep dims", Model({5, 6, 6}, {GlobalAvgPool{.keep_dims = true}, Flatten{}})});
}

TEST(CudaOps, Relu6SiluAndSigmoidMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  // Inputs in [-1, 1] scaled by the conv: ReLU6's upper clip needs larger
  // values, so a dense layer with large outputs feeds it too.
  check_against_cpu({"relu6", Model({3, 4, 4}, {ReLU6{}, Flatten{}})});
  check_against_cpu({"relu6 clipping", Model({8}, {Dense{.units = 6}, ReLU6{}})});
  check_against_cpu({"silu", Model({3, 4, 4}, {SiLU{}, Flatten{}})});
  check_against_cpu({"sigmoid", Model({3, 4, 4}, {Sigmoid{}, Flatten{}})});
}

TEST(CudaOps, ReluMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({"relu", Model({3, 4, 4}, {ReLU{}, Flatten{}})});
}

TEST(CudaOps, BatchNormMatchesTheCpuInTrainingAndInference) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({"batch norm of images", Model({3, 5, 5}, {BatchNorm{}, Flatten{}})});
  check_against_cpu({"batch norm of vectors", Model({6}, {BatchNorm{.momentum = 0.3f}})});
  // First layer, no input gradient: cuDNN still writes one (into scratch).
  check_against_cpu({"batch norm first, no input gradient", Model({2, 3, 3}, {BatchNorm{}, Flatten{}}),
                     Loss::softmax_cross_entropy, false, 0, false});
}

TEST(CudaOps, DenseAndLogSoftmaxMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({"dense", Model({12}, {Dense{.units = 7}})});
  check_against_cpu({"dense + log-softmax, nll", Model({12}, {Dense{.units = 7}, LogSoftmax{}}), Loss::nll});
}

TEST(CudaOps, LossesMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  const Model m({10}, {Dense{.units = 5}});
  check_against_cpu({"softmax cross-entropy, soft rows, smoothing 0.1", m, Loss::softmax_cross_entropy, true, 0.1f});
  check_against_cpu({"softmax cross-entropy, labels, smoothing 0.2", m, Loss::softmax_cross_entropy, false, 0.2f});
  check_against_cpu({"binary cross-entropy, smoothing 0.1", m, Loss::binary_cross_entropy, true, 0.1f});
  check_against_cpu({"nll, labels, smoothing 0.1", Model({10}, {Dense{.units = 5}, LogSoftmax{}}), Loss::nll, false,
                     0.1f});
}

TEST(CudaOps, JoinsMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  GraphBuilder add({2, 4, 4});
  auto x = add.input();
  auto c = add.add(Conv2d{.filters = 2, .kernel = 3, .padding = 1}, x);
  auto s = add.add(Add{}, {x, c, x});  // three inputs, one of them twice
  add.add(Flatten{}, s);
  check_against_cpu({"add of three", add.build()});

  GraphBuilder cat({2, 4, 4});
  x = cat.input();
  auto a = cat.add(Conv2d{.filters = 3, .kernel = 1}, x);
  auto b = cat.add(MaxPool2d{.kernel = 1}, x);
  auto j = cat.add(Concat{}, {a, b, x});
  cat.add(Flatten{}, j);
  check_against_cpu({"concat of three", cat.build()});
}

TEST(CudaOps, BadLabelsAreTheCpusUserErrors) {
  SKIP_WITHOUT_GPU();
  const Model m({4}, {Dense{.units = 3}});
  auto gpu = testing::compile_gpu(m, {.batch_size = 2}, 1);
  const std::vector<float> x(8, 0.5f);
  const std::vector<int32_t> bad{0, 3};
  EXPECT_NE(testing::error_of([&] { gpu->train_step(x.data(), bad.data()); }).find("label 3 is outside [0, 3)"),
            std::string::npos);
  auto bce = testing::compile_gpu(m, {.batch_size = 2, .loss = Loss::binary_cross_entropy}, 1);
  const std::vector<int32_t> good{0, 1};
  EXPECT_NE(testing::error_of([&] { bce->train_step(x.data(), good.data()); }).find("binary cross-entropy"),
            std::string::npos);
}

}  // namespace
}  // namespace convoy
