// MobileNetV2 on the PJRT backend against convoy's CPU backend, and why the
// whole network is compared against the CPU's own sensitivity rather than at
// 1e-4 (docs/accelerators.md has the measurements).
//
// A ReLU6 network's gradient is not a continuous function of its input: it
// jumps where an input to a ReLU6 crosses 0 or 6. Two implementations whose
// sums round differently (XLA's convolutions sum in another order) agree to
// 1e-4 only where no ReLU6 input lies within their rounding of a kink.
//  - The whole MobileNetV2 at initialisation has no such point: a deep stack
//    of training-mode batch norms amplifies rounding layer by layer, and
//    multiplying the input by 1 + 1e-7 moves the CPU's own gradient by 4e-3
//    to 3e-2 at every size and batch tried (64 to 224 pixels, batch 4 to
//    32). With SiLU in place of ReLU6 it moves by 2e-5.
//  - Its first three stages (through features.7) are steady at some batches
//    of images and not at others, where a ReLU6 input sits on a kink.
// So the 1e-4 bar is checked on the first three stages at a batch where no
// nudge moves the CPU's gradient (the test finds one and says which it
// rejected), and the whole network agrees as well as the CPU agrees with
// itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/core/rng.h"
#include "convoy/nn/zoo.h"
#include "cuda_test_helpers.h"
#include "pjrt_test_helpers.h"

namespace convoy {
namespace {

// The zoo's MobileNetV2 for `side`-pixel images and 5 classes, cut after the
// last layer of block `through` ("features.7"), then global pooling and a
// dense layer.
nn::Model mobilenet_v2_through(int64_t side, const std::string& through) {
  const nn::Model zoo = nn::mobilenet_v2({.input = {3, side, side}, .classes = 5});
  std::vector<nn::Node> graph;
  std::size_t end = 0;
  for (std::size_t i = 0; i < zoo.layers().size(); ++i)
    if (zoo.layers()[i].name.starts_with(through + ".")) end = i + 1;
  for (std::size_t i = 0; i < end; ++i) {
    const auto& p = zoo.layers()[i];
    graph.push_back({.layer = p.layer, .inputs = p.inputs, .name = p.name});
  }
  graph.push_back({.layer = nn::GlobalAvgPool{}, .inputs = {static_cast<int>(end) - 1}});
  graph.push_back({.layer = nn::Dense{.units = 5}, .inputs = {static_cast<int>(end)}, .name = "classifier.1"});
  return nn::Model(zoo.input_shape(), graph);
}

CompileOptions sgd(int64_t batch) {
  CompileOptions o;
  o.batch_size = batch;
  o.loss = Loss::softmax_cross_entropy;
  o.optimizer = {.kind = optim::Kind::sgd, .lr = 0.01f, .momentum = 0.9f, .weight_decay = 1e-4f};
  return o;
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> y;
};

Batch batch_for(const nn::Model& model, int64_t n) {
  return {testing::uniform_values(n * numel(model.input_shape()), 32), testing::class_indices(n, 5, 33)};
}

// Images as a photo's normalised pixels look, not independent noise: each a
// few random plane waves of low frequency per channel, its own brightness
// and contrast, and a little noise ([n, 3, side, side], about zero mean).
Batch smooth_images(int64_t n, int64_t side, uint64_t seed) {
  Rng rng(seed);
  Batch b{std::vector<float>(n * 3 * side * side), testing::class_indices(n, 5, 33)};
  constexpr float pi = 3.14159265f;
  for (int64_t e = 0; e < n; ++e) {
    const float brightness = rng.uniform(-1, 1), contrast = rng.uniform(0.3f, 1.5f);
    struct Wave {
      float fy, fx, phase, amplitude, colour[3];
    } waves[4];
    for (Wave& w : waves) {
      w = {rng.uniform(-6, 6), rng.uniform(-6, 6), rng.uniform(0, 2 * pi), rng.uniform(0, 1), {}};
      for (float& c : w.colour) c = rng.uniform(0.5f, 1.0f);
    }
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < side; ++i)
        for (int64_t j = 0; j < side; ++j) {
          float v = 0;
          for (const Wave& w : waves)
            v += w.amplitude * w.colour[c] * std::sin((w.fy * i + w.fx * j) * pi / side + w.phase);
          b.x[((e * 3 + c) * side + i) * side + j] = brightness + contrast * v + 0.1f * rng.uniform(-1, 1);
        }
  }
  return b;
}

// How far the CPU backend's gradient moves, relative to its largest value,
// when every input value moves by one float rounding (x * (1 + 1e-7)); with
// `all_nudges`, the most it moves under that and four more: x * (1 - 3e-7),
// x * (1 + 1e-6), and each value by its own random factor within 1 +- 1e-6
// (two patterns). ReLU6's gradient jumps at 0 and 6: where an input to one
// of them lies within a few roundings of either, some nudge moves it across,
// as another implementation's rounding may, and the gradient jumps.
// `cpu` is the model compiled for the CPU backend (gradients do not depend
// on the running statistics it keeps, so one serves any number of batches).
double cpu_gradient_moves(Executable& cpu, const Batch& b, bool all_nudges) {
  cpu.internals().loss_and_gradients(b.x.data(), b.y.data());
  const auto g = testing::gradients(cpu);
  std::vector<std::vector<float>> factors{{1.0f + 1e-7f}};
  if (all_nudges) {
    factors.push_back({1.0f - 3e-7f});
    factors.push_back({1.0f + 1e-6f});
    for (uint64_t seed : {1, 2}) factors.push_back(testing::uniform_values(b.x.size(), seed, 1.0f - 1e-6f, 1.0f + 1e-6f));
  }
  double most = 0;
  for (const auto& f : factors) {
    std::vector<float> x = b.x;
    for (std::size_t i = 0; i < x.size(); ++i) x[i] *= f.size() == 1 ? f[0] : f[i];
    cpu.internals().loss_and_gradients(x.data(), b.y.data());
    most = std::max(most, testing::relative_error(testing::gradients(cpu), g));
  }
  return most;
}

// Each learned tensor (gradients, or weights after a step) within
// `tolerance` of its own largest value. A tensor whose gradient is zero in
// exact arithmetic holds only rounding (the shift of a batch norm whose
// output reaches another batch norm through linear layers only: the second
// removes any shift), and so does its weight after a step from zero: below
// 1e-5 of the largest value on the CPU, it must be as small on PJRT.
void expect_every_tensor(const nn::Model& model, const std::vector<float>& got, const std::vector<float>& want,
                         double tolerance, const std::string& what) {
  double global = 0;
  for (float v : want) global = std::max(global, static_cast<double>(std::abs(v)));
  for (const auto& layer : model.layers())
    for (const auto& slot : layer.params) {
      const std::span<const float> g(got.data() + slot.offset, slot.size()), w(want.data() + slot.offset, slot.size());
      double scale_g = 0, scale_w = 0;
      for (std::size_t i = 0; i < w.size(); ++i) {
        scale_g = std::max(scale_g, static_cast<double>(std::abs(g[i])));
        scale_w = std::max(scale_w, static_cast<double>(std::abs(w[i])));
      }
      if (scale_w < 1e-5 * global)
        EXPECT_LT(scale_g, 1e-5 * global) << what << " of " << slot.name << ": zero on the CPU but for rounding, not on PJRT";
      else
        EXPECT_LT(testing::relative_error(g, w), tolerance) << what << " of " << slot.name;
    }
}

// MobileNetV2's first three stages (stem, features.1 to features.7: blocks
// with and without expansion, residual adds, stride-2 depthwise convolutions,
// ReLU6, 21 training-mode batch norms) on 32x32 images (quicker than 64x64,
// no steadier), batch 8. First a point where the question is well posed:
// the first batch of images (seeds 1, 2, ...) at which no nudge moves the
// CPU's own gradient by 1e-5 (on 64x64 images five batches in six had a
// ReLU6 input within rounding of a kink, on 32x32 four in five:
// docs/accelerators.md). There, one training step matches the CPU backend
// to the 1e-4: loss, logits, every gradient tensor, the updated
// weights and the running statistics.
TEST(PjrtMobileNetV2, FirstStagesMatchCpuWithin1e4) {
  REQUIRE_PJRT();
  const nn::Model model = mobilenet_v2_through(32, "features.7");
  const CompileOptions o = sgd(8);
  std::optional<Batch> well_posed;
  std::string rejected;
  const auto probe = compile_cpu(model, o, 31);
  for (uint64_t seed = 1; seed <= 16 && !well_posed; ++seed) {
    Batch b = smooth_images(8, 32, seed);
    const double moves = cpu_gradient_moves(*probe, b, /*all_nudges=*/true);
    if (moves < 1e-5)
      well_posed = std::move(b);
    else
      rejected += " seed " + std::to_string(seed) + ": " + std::to_string(moves) + ";";
  }
  ASSERT_TRUE(well_posed) << "no batch of the first 16 where the CPU's gradient is steady:" << rejected;
  if (!rejected.empty()) std::printf("batches where a nudge moved the CPU's gradient:%s\n", rejected.c_str());
  const Batch& b = *well_posed;

  testing::Pair p = testing::compile_cpu_and_pjrt(model, o, 31);
  const double want = p.cpu->internals().loss_and_gradients(b.x.data(), b.y.data());
  EXPECT_NEAR(p.pjrt->internals().loss_and_gradients(b.x.data(), b.y.data()), want, 1e-4 * want);
  EXPECT_LT(testing::relative_error(testing::output(*p.pjrt), testing::output(*p.cpu)), 1e-4) << "logits";
  const auto g_cpu = testing::gradients(*p.cpu), g_pjrt = testing::gradients(*p.pjrt);
  EXPECT_LT(testing::relative_error(g_pjrt, g_cpu), 1e-4) << "the whole gradient";
  expect_every_tensor(model, g_pjrt, g_cpu, 1e-4, "gradient");

  p.pjrt->internals().write(Held::state, testing::state(*p.cpu));  // both after one training-mode forward: the same start
  p.cpu->train_step(b.x.data(), b.y.data());
  p.pjrt->train_step(b.x.data(), b.y.data());
  expect_every_tensor(model, testing::parameters(*p.pjrt), testing::parameters(*p.cpu), 1e-4, "updated weight");
  EXPECT_LT(testing::relative_error(testing::state(*p.pjrt), testing::state(*p.cpu)), 1e-4) << "running statistics";
}

// The whole MobileNetV2 (64x64, batch 8), where the CPU's own gradient moves
// by ~1e-2 under one rounding of the input: the loss and logits still match
// to 1e-4, and the gradient is as close to the CPU's as the CPU's is to
// itself (within twice).
TEST(PjrtMobileNetV2, WholeNetworkAgreesAsWellAsTheCpuWithItself) {
  REQUIRE_PJRT();
  const nn::Model model = nn::mobilenet_v2({.input = {3, 64, 64}, .classes = 5});
  const CompileOptions o = sgd(8);
  const Batch b = batch_for(model, 8);
  const double cpu_itself = cpu_gradient_moves(*compile_cpu(model, o, 31), b, /*all_nudges=*/false);
  EXPECT_GT(cpu_itself, 1e-3) << "the whole network is better conditioned than it was: compare it at 1e-4";

  testing::Pair p = testing::compile_cpu_and_pjrt(model, o, 31);
  const double want = p.cpu->internals().loss_and_gradients(b.x.data(), b.y.data());
  EXPECT_NEAR(p.pjrt->internals().loss_and_gradients(b.x.data(), b.y.data()), want, 1e-4 * want);
  EXPECT_LT(testing::relative_error(testing::output(*p.pjrt), testing::output(*p.cpu)), 1e-4) << "logits";
  const double pjrt = testing::relative_error(testing::gradients(*p.pjrt), testing::gradients(*p.cpu));
  EXPECT_LT(pjrt, 2 * cpu_itself) << "PJRT vs CPU " << pjrt << ", CPU vs itself nudged " << cpu_itself;
}

// MobileNetV2's pieces on their own: a stride-2 depthwise convolution,
// ReLU6 after a depthwise one, the head (1x1 expansion, batch norm, ReLU6,
// pooling, dropout, dense): gradients within 1e-5.
TEST(PjrtMobileNetV2, PiecesMatchCpu) {
  REQUIRE_PJRT();
  using namespace nn;
  const std::vector<std::vector<Layer>> pieces{
      {Conv2d{.filters = 8, .kernel = 3, .stride = 2, .padding = 1, .groups = 8, .bias = false}, GlobalAvgPool{},
       Dense{.units = 5}},
      {Conv2d{.filters = 8, .kernel = 3, .padding = 1, .groups = 8, .bias = false}, ReLU6{}, GlobalAvgPool{},
       Dense{.units = 5}},
      {Conv2d{.filters = 16, .kernel = 1, .bias = false}, BatchNorm{}, ReLU6{}, GlobalAvgPool{}, Dropout{.rate = 0.2f},
       Dense{.units = 5}}};
  for (const auto& layers : pieces) {
    const Model model({8, 8, 8}, layers);
    SCOPED_TRACE(model.summary());
    CompileOptions o;
    o.batch_size = 8;
    o.loss = Loss::softmax_cross_entropy;
    testing::Pair p = testing::compile_cpu_and_pjrt(model, o);
    const Batch b = batch_for(model, 8);
    p.cpu->internals().loss_and_gradients(b.x.data(), b.y.data());
    p.pjrt->internals().loss_and_gradients(b.x.data(), b.y.data());
    EXPECT_LT(testing::relative_error(testing::gradients(*p.pjrt), testing::gradients(*p.cpu)), 1e-5);
  }
}

}  // namespace
}  // namespace convoy
