// The CUDA backend's dropout masks are the CPU backend's: the per-element
// formula its kernel evaluates (src/backends/dropout_mask.h, the same
// header compiled for the host here) against the masks CpuExecutable draws,
// across steps, layer positions, image layouts and a resumed step count.
// Runs everywhere: on a machine without a GPU this is the check of the
// formula and of the NHWC-to-NCHW index mapping (the GPU test
// CudaOps.DropoutDrawsTheCpusMasks then checks the kernel itself).
#include <gtest/gtest.h>

#include <cstring>

// Not a public header: the device formula, which only the backend includes.
#include "../src/backends/dropout_mask.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "test_helpers.h"

namespace convoy {
namespace {

using namespace nn;

// What the GPU computes for every element of an NCHW batch: x * mask.
std::vector<float> device_formula(const std::vector<float>& x, uint64_t model_seed, uint64_t layer, int64_t step,
                                  int64_t batch, int64_t channels, int64_t pixels, float rate) {
  const uint64_t seed = dropout_layer_seed(model_seed, layer);
  const int64_t example = channels * pixels;
  const float keep = 1.0f / (1.0f - rate);
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < batch; ++n) {
    const uint64_t stream = dropout_example_stream(seed, step, batch, n);
    for (int64_t j = 0; j < example; ++j) {
      const bool drop = dropout_drops(stream, dropout_cpu_index(j, channels, pixels), rate);
      y[n * example + j] = x[n * example + j] * (drop ? 0.0f : keep);
    }
  }
  return y;
}

std::vector<float> output_of(const Executable& e) {
  std::vector<float> v(e.compiled_for().batch_size * e.compiled_for().output_size);
  e.internals().read(Held::output, v);
  return v;
}

TEST(CudaDropoutMask, TheDeviceFormulaGivesTheCpuBackendsMasks) {
  const int64_t batch = 3;
  const uint64_t seed = 11;
  // Dropout as layer 2 (its seed depends on its position) of an image: the
  // CPU masks NHWC memory, the GPU NCHW. ReLU keeps the positive input as it
  // is and Flatten hands out C-major (NCHW) order.
  const Model images({3, 4, 5}, {ReLU{}, ReLU{}, Dropout{.rate = 0.3f}, Flatten{}});
  // And a vector as the model's first layer.
  const Model vectors({40}, {Dropout{.rate = 0.5f}});
  struct Case {
    const char* name;
    const Model& model;
    uint64_t layer;
    int64_t channels, pixels;
    float rate;
  };
  for (const Case& c : {Case{"images", images, 2, 3, 20, 0.3f}, Case{"vectors", vectors, 0, 40, 1, 0.5f}}) {
    SCOPED_TRACE(c.name);
    const int64_t example = c.channels * c.pixels;
    std::vector<float> x(batch * example);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.5f + static_cast<float>(i % 17) / 16.0f;
    std::vector<int32_t> y(batch);
    for (int64_t n = 0; n < batch; ++n) y[n] = static_cast<int32_t>(n);
    const CompileOptions options{.batch_size = batch, .loss = Loss::softmax_cross_entropy, .optimizer = {.lr = 0}};
    auto cpu = compile_cpu(c.model, options, seed);
    for (int64_t step = 0; step < 3; ++step) {
      cpu->internals().loss_and_gradients(x.data(), y.data());
      const auto want = output_of(*cpu);
      const auto got = device_formula(x, seed, c.layer, step, batch, c.channels, c.pixels, c.rate);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), sizeof(float) * got.size()), 0) << "step " << step;
      int64_t dropped = 0;
      for (float v : want) dropped += v == 0.0f;
      EXPECT_GT(dropped, 0) << "step " << step << ": the case must drop something";
      cpu->train_step(x.data(), y.data());
    }
    // A resumed run: the step count comes from outside.
    auto resumed = compile_cpu(c.model, options, seed);
    resumed->internals().set_steps_done(41);
    resumed->internals().loss_and_gradients(x.data(), y.data());
    EXPECT_EQ(output_of(*resumed), device_formula(x, seed, c.layer, 41, batch, c.channels, c.pixels, c.rate));
  }
}

}  // namespace
}  // namespace convoy
