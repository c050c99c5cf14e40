// The optimizers against PyTorch's update rules, written out by hand.
#include <cmath>

#include <gtest/gtest.h>

#include "convoy/core/error.h"
#include "convoy/optim/optimizer.h"

namespace convoy::optim {
namespace {

struct Stepper {
  OptimizerOptions opt;
  std::vector<float> p;
  std::vector<float> state;
  Stepper(OptimizerOptions o, std::vector<float> p0)
      : opt(o), p(std::move(p0)), state(static_cast<std::size_t>(state_size(o, static_cast<int64_t>(p.size())))) {}
  void step(std::vector<float> g) { optim::step(opt, p, g, state); }
};

}  // namespace

// torch.optim.SGD: v1 = g1, p1 = p0 - lr v1; v2 = mu v1 + g2, ...
TEST(Optimizers, SgdMatchesPyTorchMomentumSemantics) {
  Stepper r({.lr = 0.1f, .momentum = 0.5f}, {1.0f, -2.0f});
  r.step({0.4f, 1.0f});
  EXPECT_FLOAT_EQ(r.state[0], 0.4f);
  EXPECT_FLOAT_EQ(r.p[0], 1.0f - 0.04f);
  r.step({0.2f, -1.0f});
  EXPECT_FLOAT_EQ(r.state[0], 0.5f * 0.4f + 0.2f);
  EXPECT_FLOAT_EQ(r.p[0], 0.96f - 0.1f * 0.4f);
  EXPECT_FLOAT_EQ(r.state[1], 0.5f * 1.0f - 1.0f);
  EXPECT_FLOAT_EQ(r.p[1], -2.0f - 0.1f * 1.0f - 0.1f * (-0.5f));
}

TEST(Optimizers, SgdWeightDecayAndNesterov) {
  Stepper r({.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.1f, .nesterov = true}, {1.0f});
  r.step({0.5f});
  const float g = 0.5f + 0.1f * 1.0f;  // decayed gradient
  EXPECT_FLOAT_EQ(r.state[0], g);
  EXPECT_FLOAT_EQ(r.p[0], 1.0f - 0.1f * (g + 0.9f * g));
}

TEST(Optimizers, AdamTwoStepsWithBiasCorrection) {
  Stepper r({.kind = Kind::adam, .lr = 0.01f}, {1.0f});
  r.step({0.5f});
  // Step 1: m = 0.05, s = 0.00025; corrected m = 0.5, s = 0.25 -> p -= lr * 0.5 / (0.5 + eps)
  EXPECT_NEAR(r.p[0], 1.0f - 0.01f, 1e-6);
  r.step({-1.0f});
  const double m = 0.9 * 0.05 + 0.1 * -1.0, s = 0.999 * 0.00025 + 0.001 * 1.0;
  const double mh = m / (1 - 0.81), sh = s / (1 - 0.999 * 0.999);
  EXPECT_NEAR(r.p[0], 0.99 - 0.01 * mh / (std::sqrt(sh) + 1e-8), 1e-6);
  EXPECT_EQ(r.state[2], 2.0f);  // the step count
}

TEST(Optimizers, AdamWDecaysDecoupledAdamAddsL2) {
  Stepper w({.kind = Kind::adamw, .lr = 0.1f, .weight_decay = 0.5f}, {2.0f});
  w.step({0.0f});  // no gradient: only the decoupled decay moves the weight
  EXPECT_NEAR(w.p[0], 2.0f * (1 - 0.1f * 0.5f), 1e-6);
  Stepper a({.kind = Kind::adam, .lr = 0.1f, .weight_decay = 0.5f}, {2.0f});
  a.step({0.0f});  // L2: the gradient becomes wd * p = 1, an Adam step of lr
  EXPECT_NEAR(a.p[0], 2.0f - 0.1f, 1e-6);
}

TEST(Optimizers, RmspropWithAndWithoutMomentum) {
  Stepper r({.kind = Kind::rmsprop, .lr = 0.01f}, {1.0f});
  r.step({2.0f});
  const double s = 0.01 * 4.0;
  EXPECT_NEAR(r.p[0], 1.0 - 0.01 * 2.0 / (std::sqrt(s) + 1e-8), 1e-6);
  Stepper m({.kind = Kind::rmsprop, .lr = 0.01f, .momentum = 0.9f}, {1.0f});
  m.step({2.0f});
  m.step({2.0f});
  const double s2 = 0.99 * s + 0.01 * 4.0, d1 = 2.0 / std::sqrt(s), d2 = 2.0 / std::sqrt(s2);
  EXPECT_NEAR(m.p[0], 1.0 - 0.01 * d1 - 0.01 * (0.9 * d1 + d2), 1e-5);
}

TEST(Optimizers, ClipNormScalesTheGlobalGradientNorm) {
  Stepper r({.lr = 1.0f, .clip_norm = 1.0f}, {0.0f, 0.0f});
  r.step({3.0f, 4.0f});  // norm 5 -> clipped to 1: (0.6, 0.8)
  EXPECT_NEAR(r.p[0], -0.6f, 1e-5);
  EXPECT_NEAR(r.p[1], -0.8f, 1e-5);
  EXPECT_EQ(parse_kind("adamw"), Kind::adamw);
  EXPECT_THROW(parse_kind("lion"), UserError);
}

}  // namespace convoy::optim
