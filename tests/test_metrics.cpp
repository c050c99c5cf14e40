// Classification metrics against scikit-learn on the scores and labels of
// tests/fixtures/make_metrics_fixtures.py (ties included), and small cases
// worked by hand.
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "convoy/core/error.h"
#include "convoy/train/metrics.h"

namespace convoy::train {
namespace {

nlohmann::json fixture() {
  std::ifstream in(std::string(CONVOY_FIXTURES_DIR) + "/metrics_sklearn.json");
  return nlohmann::json::parse(in);
}

}  // namespace

TEST(Metrics, MatchScikitLearnIncludingTies) {
  const auto f = fixture();
  const int64_t k = f["classes"];
  const auto scores = f["scores"].get<std::vector<float>>();
  const auto labels = f["labels"].get<std::vector<int32_t>>();
  const auto predicted = f["predicted"].get<std::vector<int32_t>>();
  EXPECT_DOUBLE_EQ(top_k_accuracy(scores, k, labels, 2), f["top2"].get<double>());
  const auto confusion = confusion_matrix(labels, predicted, k);
  EXPECT_EQ(confusion, f["confusion"].get<std::vector<int64_t>>());
  const PerClass pc = per_class_scores(confusion, k);
  for (int64_t c = 0; c < k; ++c) {
    EXPECT_NEAR(pc.precision[c], f["precision"][c].get<double>(), 1e-12);
    EXPECT_NEAR(pc.recall[c], f["recall"][c].get<double>(), 1e-12);
    EXPECT_NEAR(pc.f1[c], f["f1"][c].get<double>(), 1e-12);
    EXPECT_EQ(pc.support[c], f["support"][c].get<int64_t>());
  }
  std::vector<uint8_t> onehot(labels.size() * k, 0);
  for (std::size_t i = 0; i < labels.size(); ++i) onehot[i * k + labels[i]] = 1;
  const auto aucs = column_roc_auc(scores, onehot, k);
  for (int64_t c = 0; c < k; ++c) EXPECT_NEAR(aucs[c], f["column_auc"][c].get<double>(), 1e-12);
  EXPECT_NEAR(mean_defined(aucs), f["mean_auc"].get<double>(), 1e-12);
}

TEST(Metrics, HandWorkedCases) {
  // Perfect ranking, reversed ranking, all tied.
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.1f, 0.2f, 0.8f, 0.9f}, std::vector<uint8_t>{0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.9f, 0.8f, 0.2f, 0.1f}, std::vector<uint8_t>{0, 0, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.5f, 0.5f, 0.5f}, std::vector<uint8_t>{0, 1, 1}), 0.5);
  // One class only: undefined, and skipped by the mean.
  EXPECT_TRUE(std::isnan(roc_auc(std::vector<float>{0.1f, 0.2f}, std::vector<uint8_t>{1, 1})));
  EXPECT_DOUBLE_EQ(mean_defined({0.5, std::nan(""), 1.0}), 0.75);
  // top-1 equals accuracy; top-k with k = classes is 1.
  const std::vector<float> s{0.1f, 0.7f, 0.2f, 0.5f, 0.4f, 0.1f};
  EXPECT_DOUBLE_EQ(top_k_accuracy(s, 3, std::vector<int32_t>{1, 1}, 1), 0.5);
  EXPECT_DOUBLE_EQ(top_k_accuracy(s, 3, std::vector<int32_t>{2, 2}, 3), 1.0);
  EXPECT_THROW(top_k_accuracy(s, 4, std::vector<int32_t>{1, 1}, 1), UserError);
}

}  // namespace convoy::train
