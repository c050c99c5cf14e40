#pragma once
// The CPU device's fused ops (backends/cpu/conv_pool_op.h) against the same
// device with every layer on its own op: what the fusion tests share.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/batch_slices.h"
#include "backends/cpu/backend_entry.h"
#include "backends/program.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/cpu_info.h"
#include "convoy/nn/model.h"
#include "test_helpers.h"

namespace convoy::fused_device_check {

using nn::Model;

// Tests run once per kernel copy, skipped (named) where this CPU cannot run it.
class KernelSetTest : public ::testing::TestWithParam<KernelSet> {
 protected:
  void SetUp() override {
    if (!cpu_runs(GetParam())) GTEST_SKIP() << "this CPU cannot run the " << kernel_set_name(GetParam()) << " kernels";
  }
  KernelSet set() const { return GetParam(); }
};

inline CompileOptions options_for(KernelSet set, int64_t batch, Loss loss = Loss::nll) {
  return {.batch_size = batch, .loss = loss, .optimizer = {.lr = 0.05f, .momentum = 0.9f}, .cpu_kernels = set};
}

// slices > 1: batch slices (backends/batch_slices.h), each slice its own ops.
inline std::unique_ptr<Executable> compile(const Model& model, const CompileOptions& o, bool fuse, int64_t slices = 1) {
  const cpu::BackendEntry& entry = cpu::backend(o.cpu_kernels);
  auto make = [&]() -> std::unique_ptr<Device> {
    return fuse ? entry.make_device(o) : entry.make_unfused_device(o);
  };
  if (slices > 1) return make_batch_slices(model, o, 7, slices, make);
  return std::make_unique<Program>(model, o, 7, make());
}

// Per layer, the layer its work runs in ("" : its own), as --profile reports it.
inline std::vector<std::string> runs_in(Executable& exe) {
  std::vector<std::string> in;
  for (const LayerProfile& p : exe.internals().profile()) in.push_back(p.runs_in);
  return in;
}

// Images with flat zero patches among uniform values: equal values for the
// ops' comparisons and masks. (A conv's outputs then tie within a pooling
// window, but over identical input patches, so where such a tie routes
// leaves the weight gradient as it is: test_conv_pool_fusion's
// TiedMaximaRouteToTheFirstPosition ties windows over different patches.)
inline std::vector<float> images(const Model& model, int64_t batch, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<std::size_t>(batch * numel(model.input_shape())));
  const int64_t width = model.input_shape().back();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const int64_t col = static_cast<int64_t>(i) % width, row = static_cast<int64_t>(i) / width;
    x[i] = (row / 4 + col / 5) % 3 == 0 ? 0.0f : rng.uniform(-1.0f, 1.0f);
  }
  return x;
}

inline std::vector<int32_t> labels(int64_t batch, int64_t classes) {
  std::vector<int32_t> y;
  for (int64_t i = 0; i < batch; ++i) y.push_back(static_cast<int32_t>(i * 7 % classes));
  return y;
}

inline void expect_same_bits(const Executable& a, const Executable& b, Held held, const std::string& when) {
  const std::vector<float> x = a.internals().copy_of(held), y = b.internals().copy_of(held);
  ASSERT_EQ(x.size(), y.size()) << held_name(held) << " " << when;
  if (x.empty()) return;  // a model without state: memcmp takes no null pointers, even for 0 bytes
  if (std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0) return;
  // Any NaN matches any NaN: of two NaN operands, an x86 instruction returns
  // the first, and compilers order a sum's or a product's operands as they
  // like (IEEE 754 leaves a NaN's sign and payload unspecified); where NaNs
  // are, and every other value's bits, -0 included, must match.
  std::size_t i = 0;
  while (i < x.size() && (std::memcmp(&x[i], &y[i], sizeof(float)) == 0 || (std::isnan(x[i]) && std::isnan(y[i])))) ++i;
  if (i == x.size()) return;
  ADD_FAILURE() << held_name(held) << " differ " << when << ", first at [" << i << "]: " << x[i] << " vs " << y[i]
                << " (bits " << std::hex << std::bit_cast<uint32_t>(x[i]) << " vs " << std::bit_cast<uint32_t>(y[i])
                << std::dec << "; largest relative error " << testing::relative_error(x, y) << ")";
}

// `steps` training steps on both, every buffer compared after each, then an
// evaluation's outputs and metrics.
inline void expect_same_training(const Model& model, const CompileOptions& o, int steps, int64_t slices = 1) {
  auto fused = compile(model, o, true, slices), unfused = compile(model, o, false, slices);
  const int64_t batch = o.batch_size, classes = model.output_shape()[0];
  const std::vector<int32_t> y = labels(batch, classes);
  for (int s = 0; s < steps; ++s) {
    const std::vector<float> x = images(model, batch, 100 + static_cast<uint64_t>(s));
    fused->train_step(x.data(), y.data());
    unfused->train_step(x.data(), y.data());
    const std::string when = "after step " + std::to_string(s + 1);
    for (Held h : {Held::parameters, Held::gradients, Held::state, Held::optimizer_state, Held::output})
      expect_same_bits(*fused, *unfused, h, when);
    if (o.input_gradient) expect_same_bits(*fused, *unfused, Held::input_gradient, when);
  }
  const std::vector<float> x = images(model, batch, 99);
  fused->eval_step(x.data(), y.data(), batch);
  unfused->eval_step(x.data(), y.data(), batch);
  expect_same_bits(*fused, *unfused, Held::output, "in evaluation");
  const Metrics a = fused->metrics(Metrics::reset), b = unfused->metrics(Metrics::reset);
  EXPECT_EQ(a.loss_sum, b.loss_sum);
  EXPECT_EQ(a.correct, b.correct);
}

// Gradients and outputs through -0, NaN and ±inf, with and without the
// input gradient, for a model of 4×5×5 inputs whose first layer is a batch
// norm of them (its gamma and beta the model's first 8 parameters) and whose
// last has 6 outputs: BN channel 1 gets gamma 0 (y = beta exactly: +0, then
// -0.5), channel 2 beta -inf; the input a NaN in example 0, channel 3 (that
// channel's statistics are NaN) and a -0, later ±inf (NaN losses, NaN
// gradients). check(fused): what a test expects of the fused device besides
// equal bits, run first.
template <class Check>
void expect_same_through_special_values(const Model& model, KernelSet set, Check check) {
  for (bool input_gradient : {false, true}) {
    auto o = options_for(set, 6, Loss::softmax_cross_entropy);
    o.input_gradient = input_gradient;
    auto fused = compile(model, o, true), unfused = compile(model, o, false);
    check(*fused);
    std::vector<float> params = model.initial_parameters(3);
    params[1] = 0.0f;
    params[4 + 1] = 0.0f;
    params[4 + 2] = -std::numeric_limits<float>::infinity();
    std::vector<float> x = images(model, 6, 11);
    x[3 * 25 + 7] = std::numeric_limits<float>::quiet_NaN();
    x[25 * 4 + 2] = -0.0f;
    const std::vector<int32_t> y = labels(6, 6);
    for (int round = 0; round < 3; ++round) {
      if (round == 1) params[4 + 1] = -0.5f;
      if (round == 2) x[25 * 4 + 3] = -std::numeric_limits<float>::infinity(), x[25 * 8 + 4] = -x[25 * 4 + 3];
      fused->internals().write(Held::parameters, params);
      unfused->internals().write(Held::parameters, params);
      fused->internals().loss_and_gradients(x.data(), y.data());
      unfused->internals().loss_and_gradients(x.data(), y.data());
      const std::string when = "in round " + std::to_string(round) + (input_gradient ? " with" : " without") +
                               " the input gradient";
      for (Held h : {Held::gradients, Held::output}) expect_same_bits(*fused, *unfused, h, when);
      if (input_gradient) expect_same_bits(*fused, *unfused, Held::input_gradient, when);
      if (round == 0) {
        const std::vector<float> g = fused->internals().copy_of(Held::gradients);
        EXPECT_TRUE(std::isnan(g[3]) && std::isfinite(g[4 + 3])) << "BN channel 3: NaN gamma gradient, finite beta's";
      }
    }
  }
}

}  // namespace convoy::fused_device_check
