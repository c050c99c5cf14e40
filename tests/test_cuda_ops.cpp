// Every layer and loss on the GPU against the CPU backend, on the same weights
// and inputs: outputs, loss, parameter and input gradients, running
// statistics, and inference outputs and metrics, to 1e-4 relative (fp32,
// TF32 off). Each case is one layer (then Flatten where needed), so a mismatch
// names the op. Skipped without a usable GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

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
  std::vector<float> state = {};  // when set: the running statistics both start from
};

void check_against_cpu(const OpCase& c) {
  SCOPED_TRACE(c.name);
  const int64_t batch = 4;
  const CompileOptions options{.batch_size = batch, .loss = c.loss, .label_smoothing = c.label_smoothing,
                               .optimizer = {}, .input_gradient = c.input_gradient};
  auto [cpu, gpu] = testing::compile_both(c.model, options, 17);
  ASSERT_EQ(testing::parameters(*cpu), testing::parameters(*gpu));  // the same start
  if (!c.state.empty()) {
    cpu->internals().write(Held::state, c.state);
    gpu->internals().write(Held::state, c.state);
  }

  const int64_t classes = c.model.output_shape()[0];
  const std::vector<float> x = testing::uniform_values(batch * numel(c.model.input_shape()), 3);
  const std::vector<int32_t> labels = testing::class_indices(batch, classes, 4);
  const std::vector<float> rows = testing::uniform_values(batch * classes, 5, 0, 1);
  const Targets y = c.dense_targets ? Targets::rows(rows.data()) : Targets(labels.data());

  // Training-mode forward and backward.
  const double want_loss = cpu->internals().loss_and_gradients(x.data(), y);
  const double got_loss = gpu->internals().loss_and_gradients(x.data(), y);
  EXPECT_NEAR(got_loss, want_loss, kTolerance * std::abs(want_loss)) << "loss";
  EXPECT_LT(relative_error(testing::output(*gpu), testing::output(*cpu)), kTolerance) << "output";
  testing::expect_per_tensor(c.model, testing::gradients(*gpu), testing::gradients(*cpu), kTolerance, "gradient");
  if (c.input_gradient) {
    std::vector<float> want(x.size()), got(x.size());
    cpu->internals().read(Held::input_gradient, want);
    gpu->internals().read(Held::input_gradient, got);
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
  const Metrics want = cpu->metrics(Metrics::reset), got = gpu->metrics(Metrics::reset);
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

// The zoo's layers that the GPU turned away until it had kernels for them.

TEST(CudaOps, MultiplyMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  // Squeeze-and-excitation: one [C, 1, 1] gate per example and channel.
  GraphBuilder se({4, 5, 5});
  auto x = se.add(Conv2d{.filters = 4, .kernel = 3, .padding = 1}, se.input());
  auto s = se.add(GlobalAvgPool{.keep_dims = true}, x);
  s = se.add(Conv2d{.filters = 4, .kernel = 1}, s);
  se.add(Flatten{}, se.add(Multiply{}, {x, se.add(Sigmoid{}, s)}));
  check_against_cpu({"squeeze-and-excitation gate [C, 1, 1]", se.build()});

  GraphBuilder vec({3, 4, 4});
  auto p = vec.add(Dense{.units = 3}, vec.add(GlobalAvgPool{}, vec.input()));
  vec.add(Flatten{}, vec.add(Multiply{}, {vec.input(), vec.add(Sigmoid{}, p)}));
  check_against_cpu({"gate [C] on an image, the image being the model's input", vec.build()});

  GraphBuilder el({2, 3, 3});
  auto a = el.add(Conv2d{.filters = 2, .kernel = 1}, el.input());
  el.add(Flatten{}, el.add(Multiply{}, {el.input(), a}));
  check_against_cpu({"element-wise", el.build()});

  GraphBuilder first({2, 3, 3});
  auto b = first.add(Conv2d{.filters = 2, .kernel = 1}, first.input());
  first.add(Flatten{}, first.add(Multiply{}, {first.input(), b}));
  check_against_cpu({"element-wise, no input gradient", first.build(), Loss::softmax_cross_entropy, false, 0, false});
}

TEST(CudaOps, UnevenSamePaddingMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  // TensorFlow's "same" with an odd total: the extra row and column go to
  // the end, which cuDNN's symmetric padding cannot express.
  const auto conv = [](int64_t filters, int64_t kernel, int64_t stride) {
    return Conv2d{.filters = filters, .kernel = kernel, .stride = stride, .padding = kSame};
  };
  const auto avg = [](int64_t kernel, int64_t stride, bool count_pad) {
    return AvgPool2d{.kernel = kernel, .stride = stride, .padding = kSame, .count_include_pad = count_pad};
  };
  check_against_cpu({"conv 3x3 stride 2 on 8 (pads 0 and 1)", Model({3, 8, 8}, {conv(4, 3, 2), Flatten{}})});
  check_against_cpu({"conv 5x5 stride 2 on 10 (pads 1 and 2)", Model({2, 10, 10}, {conv(3, 5, 2), Flatten{}})});
  Conv2d depthwise = conv(4, 3, 2);
  depthwise.groups = 4;
  depthwise.bias = false;
  check_against_cpu({"depthwise 3x3 stride 2, no bias, 8 x 6 (uneven on both axes)",
                     Model({4, 8, 6}, {depthwise, Flatten{}})});
  check_against_cpu({"conv 2x2 stride 1 (pads 0 and 1)", Model({2, 5, 5}, {conv(2, 2, 1), Flatten{}})});
  check_against_cpu({"uneven conv first, no input gradient", Model({3, 8, 8}, {conv(4, 3, 2), Flatten{}}),
                     Loss::softmax_cross_entropy, false, 0, false});
  check_against_cpu({"max pool 3 stride 2 on 8",
                     Model({2, 8, 8}, {MaxPool2d{.kernel = 3, .stride = 2, .padding = kSame}, Flatten{}})});
  check_against_cpu({"max pool 2 stride 2 on 7",
                     Model({2, 7, 7}, {MaxPool2d{.kernel = 2, .stride = 2, .padding = kSame}, Flatten{}})});
  check_against_cpu({"avg pool 3 stride 2 on 8, padding counted", Model({2, 8, 8}, {avg(3, 2, true), Flatten{}})});
  check_against_cpu({"avg pool 3 stride 2 on 8, padding not counted", Model({2, 8, 8}, {avg(3, 2, false), Flatten{}})});
  check_against_cpu({"avg pool 2 stride 1 on 5, padding not counted", Model({3, 5, 5}, {avg(2, 1, false), Flatten{}})});
}

TEST(CudaOps, FrozenLayersMatchTheCpu) {
  SKIP_WITHOUT_GPU();
  // No parameter gradient (zero on both), batch norm on its running
  // statistics (which stay as they are), the input gradient flowing through.
  Model images({2, 6, 6}, {Conv2d{.filters = 4, .kernel = 3}, BatchNorm{}, ReLU{}, Flatten{}, Dense{.units = 5}});
  images.set_trainable(false, images.layers()[0].name);
  images.set_trainable(false, images.layers()[1].name);
  // Running statistics away from (0, 1), so that using them shows.
  const auto statistics = [](int64_t channels) {
    std::vector<float> s = testing::uniform_values(2 * channels, 9, -0.5f, 0.5f);   // means
    for (int64_t c = channels; c < 2 * channels; ++c) s[c] = 0.5f + 2 * std::abs(s[c]);  // variances
    return s;
  };
  check_against_cpu({"frozen conv and batch norm", images, Loss::softmax_cross_entropy, false, 0, true, statistics(4)});
  Model vectors({12}, {Dense{.units = 8}, BatchNorm{}, Dense{.units = 5}});
  for (const auto& layer : vectors.layers()) vectors.set_trainable(false, layer.name);
  check_against_cpu({"everything frozen", vectors, Loss::softmax_cross_entropy, false, 0, true, statistics(8)});
}

// Bit for bit: x * mask is one float multiply on both sides.
void expect_same_masks(Executable& cpu, Executable& gpu, const std::vector<float>& x, const std::vector<int32_t>& y,
                       const std::string& when) {
  cpu.internals().loss_and_gradients(x.data(), y.data());
  gpu.internals().loss_and_gradients(x.data(), y.data());
  const std::vector<float> want = testing::output(cpu), got = testing::output(gpu);
  EXPECT_EQ(got, want) << "dropout output " << when;
  int64_t dropped = 0;
  for (float v : want) dropped += v == 0.0f;
  EXPECT_GT(dropped, 0) << when;
}

TEST(CudaOps, DropoutDrawsTheCpusMasks) {
  SKIP_WITHOUT_GPU();
  check_against_cpu({"dropout of vectors", Model({12}, {Dense{.units = 10}, Dropout{.rate = 0.3f}})});
  check_against_cpu({"dropout of images", Model({3, 4, 5}, {Dropout{.rate = 0.5f}, Flatten{}})});
  check_against_cpu({"dropout rate 0", Model({12}, {Dense{.units = 10}, Dropout{.rate = 0.0f}})});

  // The masks through steps, CUDA graphs, a step that is not finite and a
  // resume. Images: the CPU masks its NHWC memory, the GPU NCHW.
  const Model m({3, 4, 5}, {ReLU{}, Dropout{.rate = 0.5f}, Flatten{}});
  const int64_t batch = 4, n = 3;
  CompileOptions options{.batch_size = batch, .loss = Loss::softmax_cross_entropy, .steps_per_execution = n};
  auto [cpu, gpu] = testing::compile_both(m, options, 23);
  const std::vector<float> x = testing::uniform_values(n * batch * 60, 1, 0.5f, 1.5f);
  const std::vector<int32_t> y = testing::class_indices(n * batch, 60, 2);
  expect_same_masks(*cpu, *gpu, x, y, "at step 0");
  cpu->train_step(x.data(), y.data());
  gpu->train_step(x.data(), y.data());
  expect_same_masks(*cpu, *gpu, x, y, "at step 1");
  for (int round = 0; round < 3; ++round) {  // eager, captured, replayed
    EXPECT_EQ(cpu->train_steps(x.data(), y.data(), n), n);
    EXPECT_EQ(gpu->train_steps(x.data(), y.data(), n), n);
    expect_same_masks(*cpu, *gpu, x, y, "after " + std::to_string(round + 1) + " executions of 3 steps");
  }
  std::vector<float> bad(x.begin(), x.begin() + batch * 60);
  bad[5] = std::numeric_limits<float>::infinity();  // ReLU passes it (a NaN it would zero); masked, NaN
  cpu->train_step(bad.data(), y.data());
  gpu->train_step(bad.data(), y.data());
  EXPECT_FALSE(gpu->last_step_finite());
  expect_same_masks(*cpu, *gpu, x, y, "after a step that was not finite (no new mask)");
  cpu->internals().set_steps_done(1000);
  gpu->internals().set_steps_done(1000);
  expect_same_masks(*cpu, *gpu, x, y, "after set_steps_done (a resume)");
  cpu->eval_step(x.data(), y.data(), batch);
  gpu->eval_step(x.data(), y.data(), batch);
  EXPECT_EQ(testing::output(*gpu), testing::output(*cpu)) << "inference: the identity";
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
