#pragma once
// The finite-difference gradient check of the per-op tests
// (tests/test_gradcheck.cpp), shared with the held-out models
// (tests/test_held_out_models.cpp): the analytic gradients (parameters and
// input) match central differences of the loss computed by the same Executable.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/rng.h"
#include "convoy/nn/model.h"

namespace convoy::testing {


// Inputs on an evenly spaced, shuffled grid that avoids 0: no two values (and
// no value and ReLU's kink) closer than the finite-difference step can flip.
inline std::vector<float> spaced_inputs(int64_t count, uint64_t seed) {
  std::vector<int64_t> idx(count);
  std::iota(idx.begin(), idx.end(), 0);
  Rng rng(seed);
  shuffle(idx, rng);
  std::vector<float> x(count);
  for (int64_t i = 0; i < count; ++i) {
    const float v = -1.0f + 2.0f * (static_cast<float>(idx[i]) + 0.5f) / static_cast<float>(count);
    x[i] = v;
  }
  return x;
}

struct GradCase {
  const char* name;
  nn::Model model;
  Loss loss = Loss::softmax_cross_entropy;
  bool dense_targets = false;  // soft/multi-hot rows instead of class indices
  float label_smoothing = 0;
  float input_scale = 1;  // inputs span [-scale, scale]
  ConvAlgo conv_algo = ConvAlgo::automatic;
  uint64_t seed = 11;  // of the initial parameters
};

inline void check_gradients(const GradCase& c) {
  SCOPED_TRACE(c.name);
  const int64_t batch = 3;
  CompileOptions opt{.batch_size = batch, .loss = c.loss, .label_smoothing = c.label_smoothing, .optimizer = {},
                     .input_gradient = true, .conv_algo = c.conv_algo};
  auto exe = compile_cpu(c.model, opt, c.seed);
  const int64_t in_size = batch * numel(c.model.input_shape());
  std::vector<float> x = spaced_inputs(in_size, 5);
  for (float& v : x) v *= c.input_scale;
  const int64_t classes = c.model.output_shape()[0];
  std::vector<int32_t> y(batch);
  Rng rng(3);
  for (auto& v : y) v = static_cast<int32_t>(rng.below(classes));
  // Dense rows: arbitrary values in [0, 1] (soft and multi-hot targets alike).
  std::vector<float> rows(batch * classes);
  Rng row_rng(4);  // its own stream: the sampled coordinates below stay as they were
  for (auto& v : rows) v = static_cast<float>(row_rng.below(1000)) / 999.0f;
  const Targets targets = c.dense_targets ? Targets::rows(rows.data()) : Targets(y.data());

  std::vector<float> params(c.model.num_parameters());
  exe->internals().read(Held::parameters, params);
  const double loss = exe->internals().loss_and_gradients(x.data(), targets);
  std::vector<float> grads(params.size()), dx(x.size());
  exe->internals().read(Held::gradients, grads);
  exe->internals().read(Held::input_gradient, dx);

  // Frozen layers' parameters get no gradient; only the others are checked.
  std::vector<int64_t> trainable;
  for (const auto& plan : c.model.layers())
    for (const auto& slot : plan.params)
      for (int64_t i = slot.offset; i < slot.offset + slot.size(); ++i) {
        if (plan.trainable) trainable.push_back(i);
        else EXPECT_EQ(grads[i], 0.0f) << slot.name << " is frozen";
      }
  std::vector<int64_t> every_input(x.size());
  std::iota(every_input.begin(), every_input.end(), 0);

  // Sampled coordinates of a vector, perturbed through `apply`.
  auto check = [&](const char* what, std::vector<float>& values, const std::vector<float>& analytic,
                   std::vector<int64_t> coords, auto apply) {
    const double eps = 1e-3;
    shuffle(coords, rng);
    coords.resize(std::min<std::size_t>(coords.size(), 60));
    double worst = 0, scale = 1e-3;
    for (float g : analytic) scale = std::max(scale, static_cast<double>(std::abs(g)));
    // The loss is a float: each of the two differenced values is off by a few
    // of its ulps, a floor on the numeric gradient's error that matters where
    // every gradient is tiny (a whole model's input gradient).
    scale = std::max(scale, 8 * std::abs(loss) * 0x1p-23 / (2 * eps) / 2e-2);
    for (int64_t i : coords) {
      const float keep = values[i];
      values[i] = keep + static_cast<float>(eps);
      apply();
      const double up = exe->internals().loss_and_gradients(x.data(), targets);
      values[i] = keep - static_cast<float>(eps);
      apply();
      const double down = exe->internals().loss_and_gradients(x.data(), targets);
      values[i] = keep;
      apply();
      const double numeric = (up - down) / (2 * eps);
      const double err = std::abs(numeric - analytic[i]) / scale;
      worst = std::max(worst, err);
      EXPECT_LT(err, 2e-2) << what << "[" << i << "]: numeric " << numeric << " analytic " << analytic[i];
    }
    return worst;
  };
  if (!trainable.empty())
    check("param", params, grads, trainable, [&] { exe->internals().write(Held::parameters, params); });
  check("input", x, dx, every_input, [] {});

  // The whole input gradient at once, along its own direction and along a
  // random one: a move spread over every input changes the loss by
  // eps·|g|, far above the float loss's rounding where each coordinate's
  // share is below it (a whole model's input gradients are ~1e-4, where the
  // floor above lets a per-coordinate error of that size pass). No input
  // moves more than the per-coordinate check's 1e-3.
  const double noise = 8 * std::abs(loss) * 0x1p-23;
  auto along = [&](const char* what, const std::vector<double>& v) {
    double norm = 0, largest = 0, expected = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      norm += v[i] * v[i];
      expected += v[i] * static_cast<double>(dx[i]);
    }
    norm = std::sqrt(norm);
    if (norm == 0) return;
    for (double vi : v) largest = std::max(largest, std::abs(vi) / norm);
    expected /= norm;
    const double eps = 1e-3 / largest;
    const std::vector<float> keep = x;
    auto loss_at = [&](int sign) {
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = keep[i] + static_cast<float>(sign * eps * v[i] / norm);
      return exe->internals().loss_and_gradients(x.data(), targets);
    };
    const double numeric = (loss_at(1) - loss_at(-1)) / (2 * eps);
    x = keep;
    double g_norm = 0;
    for (float g : dx) g_norm += static_cast<double>(g) * g;
    const double tolerance = 2e-2 * std::sqrt(g_norm) + 4 * noise / (2 * eps);
    EXPECT_LT(std::abs(numeric - expected), tolerance)
        << "input gradient along " << what << ": numeric " << numeric << " analytic " << expected;
  };
  std::vector<double> own(dx.begin(), dx.end()), random(dx.size());
  Rng direction_rng(5);
  for (double& r : random) r = static_cast<double>(direction_rng.below(2001)) / 1000.0 - 1.0;
  along("itself", own);
  along("a random direction", random);
}

}  // namespace convoy::testing
