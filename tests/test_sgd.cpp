#include <gtest/gtest.h>

#include "convoy/optim/sgd.h"

namespace convoy::optim {

// torch.optim.SGD by hand: v1 = g1, p1 = p0 - lr v1; v2 = mu v1 + g2, ...
TEST(Sgd, MatchesPyTorchMomentumSemantics) {
  std::vector<float> p{1.0f, -2.0f}, v(2, 0.0f);
  const SgdOptions opt{.lr = 0.1f, .momentum = 0.5f};
  sgd_update(p, std::vector<float>{0.4f, 1.0f}, v, opt);
  EXPECT_FLOAT_EQ(v[0], 0.4f);
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.04f);
  sgd_update(p, std::vector<float>{0.2f, -1.0f}, v, opt);
  EXPECT_FLOAT_EQ(v[0], 0.5f * 0.4f + 0.2f);
  EXPECT_FLOAT_EQ(p[0], 0.96f - 0.1f * 0.4f);
  EXPECT_FLOAT_EQ(v[1], 0.5f * 1.0f - 1.0f);
  EXPECT_FLOAT_EQ(p[1], -2.0f - 0.1f * 1.0f - 0.1f * (-0.5f));
}

TEST(Sgd, WeightDecayAndNesterov) {
  std::vector<float> p{1.0f}, v{0.0f};
  sgd_update(p, std::vector<float>{0.5f}, v, {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.1f, .nesterov = true});
  const float g = 0.5f + 0.1f * 1.0f;  // decayed gradient
  EXPECT_FLOAT_EQ(v[0], g);
  EXPECT_FLOAT_EQ(p[0], 1.0f - 0.1f * (g + 0.9f * g));
}

}  // namespace convoy::optim
