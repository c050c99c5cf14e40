// data.class_weight: balanced and per-class weights, as weighted target rows.
#include <gtest/gtest.h>

#include "convoy/core/error.h"
#include "convoy/core/rng.h"
#include "test_helpers.h"
#include "app/class_weights.h"

namespace convoy::train {
namespace {

TEST(ClassWeights, BalancedIsExamplesOverClassesTimesCount) {
  DataConfig d;
  d.class_weight = "balanced";
  const auto w = class_weights_for(d, {"a", "b", "c"}, {10, 5, 0});
  ASSERT_EQ(w.size(), 3u);
  EXPECT_DOUBLE_EQ(w[0], 15.0 / 30);
  EXPECT_DOUBLE_EQ(w[1], 15.0 / 15);
  EXPECT_DOUBLE_EQ(w[2], 1.0);  // absent from the split: nothing to weigh
  EXPECT_TRUE(class_weights_for(DataConfig{}, {"a", "b"}, {1, 1}).empty());
}

TEST(ClassWeights, AMapWeighsTheNamedClassesAndNamesTheClassesOtherwise) {
  DataConfig d;
  d.class_weight = "map";
  d.class_weights = {{"b", 4.0}};
  EXPECT_EQ(class_weights_for(d, {"a", "b"}, {3, 1}), (std::vector<double>{1.0, 4.0}));
  d.class_weights = {{"z", 4.0}};
  const std::string e = testing::error_of([&] { class_weights_for(d, {"a", "b"}, {3, 1}); });
  EXPECT_NE(e.find("'z' is not a class of the data; its classes: a, b"), std::string::npos) << e;
}

TEST(ClassWeights, TheLabelBecomesItsWeightAtItsIndex) {
  data::Example e;
  Tensor label(DType::i32, {});
  label.data<int32_t>()[0] = 1;
  e.set("label", std::move(label));
  Rng rng(0);
  const data::Example out = weighted_one_hot({0.5, 3.0, 1.0})(std::move(e), rng);
  const auto row = out.tensor("label").data<float>();
  ASSERT_EQ(row.size(), 3u);
  EXPECT_EQ(row[0], 0.0f);
  EXPECT_EQ(row[1], 3.0f);
  EXPECT_EQ(row[2], 0.0f);
}

}  // namespace
}  // namespace convoy::train
