#include <cmath>

#include <gtest/gtest.h>

#include "convoy/core/error.h"
#include "convoy/nn/model.h"

namespace convoy::nn {

TEST(Sequential, SeedCnnShapesAndParameterCountsMatchTheArticle) {
  Sequential m = seed_cnn();
  const auto& L = m.layers();
  ASSERT_EQ(L.size(), 13u);
  EXPECT_EQ(L[0].name, "conv2d_0");
  EXPECT_EQ(L[0].output_shape, (Shape{10, 24, 24}));
  EXPECT_EQ(L[1].output_shape, (Shape{10, 12, 12}));
  EXPECT_EQ(L[4].output_shape, (Shape{20, 8, 8}));
  EXPECT_EQ(L[5].output_shape, (Shape{20, 4, 4}));
  EXPECT_EQ(L[8].output_shape, (Shape{320}));
  EXPECT_EQ(m.output_shape(), (Shape{10}));
  // PyTorch's count for the article's module: 260+20+5020+40+16050+510.
  EXPECT_EQ(m.num_parameters(), 21900);
  EXPECT_EQ(m.num_state(), 60);
  EXPECT_EQ(L[4].params[0].shape, (Shape{20, 10, 5, 5}));
  EXPECT_EQ(L[9].params[0].shape, (Shape{50, 320}));
  EXPECT_NE(m.summary().find("Total params: 21900"), std::string::npos);
}

TEST(Sequential, InitialisationFollowsPyTorchDefaults) {
  Sequential m = seed_cnn();
  auto p = m.initial_parameters(3);
  auto s = m.initial_state();
  for (const auto& plan : m.layers()) {
    for (const auto& slot : plan.params) {
      float lo = 1e9f, hi = -1e9f;
      for (int64_t i = 0; i < slot.size(); ++i) {
        lo = std::min(lo, p[slot.offset + i]);
        hi = std::max(hi, p[slot.offset + i]);
      }
      if (plan.name.starts_with("batch_norm")) {
        const float want = slot.name.ends_with("weight") ? 1.0f : 0.0f;
        EXPECT_EQ(lo, want) << slot.name;
        EXPECT_EQ(hi, want) << slot.name;
      } else {
        const auto& w = plan.params[0];
        const float bound = 1.0f / std::sqrt(static_cast<float>(w.size() / w.shape[0]));
        EXPECT_GE(lo, -bound) << slot.name;
        EXPECT_LE(hi, bound) << slot.name;
        if (slot.size() >= 50) {
          EXPECT_GT(hi - lo, bound) << slot.name << " looks too narrow to be uniform";
        }
      }
    }
  }
  for (const auto& slot : m.layers()[3].state)
    EXPECT_EQ(s[slot.offset], slot.name.ends_with("running_var") ? 1.0f : 0.0f);
  EXPECT_EQ(m.initial_parameters(3), p);
  EXPECT_NE(m.initial_parameters(4), p);
}

TEST(Sequential, ShapeErrorsNameTheLayer) {
  try {
    Sequential({1, 4, 4}, {Conv2d{.filters = 2, .kernel = 5}});
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d_0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Sequential({1, 8, 8}, {Dense{.units = 3}}), UserError);  // needs Flatten first
  EXPECT_THROW(Sequential({4}, std::vector<Layer>{}), UserError);
}

}  // namespace convoy::nn
