#pragma once
// Classification metrics over a whole evaluation pass, computed on the host
// from the model's scores (probabilities, log-probabilities or logits: every
// metric here depends only on each row's or column's order, so any
// monotonic transform gives the same numbers). The definitions are
// scikit-learn's, so numbers can be checked against it.
#include <cstdint>
#include <span>
#include <vector>

namespace convoy::train {

// Fraction of rows whose true class is among the k highest scores (ties
// broken toward the higher class index, as scikit-learn's reversed stable
// argsort does).
double top_k_accuracy(std::span<const float> scores, int64_t classes, std::span<const int32_t> labels, int64_t k);

// counts[true * classes + predicted].
std::vector<int64_t> confusion_matrix(std::span<const int32_t> labels, std::span<const int32_t> predicted,
                                      int64_t classes);

struct PerClass {
  std::vector<double> precision, recall, f1;  // 0 where undefined (no predictions / no examples), as sklearn's zero_division=0
  std::vector<int64_t> support;               // true examples per class
};
PerClass per_class_scores(std::span<const int64_t> confusion, int64_t classes);

// Area under the ROC curve of one score column against 0/1 truth: the
// probability that a random positive outranks a random negative (ties count
// half). NaN when the column has only positives or only negatives.
double roc_auc(std::span<const float> scores, std::span<const uint8_t> positive);

// Per-class one-vs-rest ROC AUC over [rows, classes] scores and [rows,
// classes] 0/1 targets (one-hot or multi-hot); the mean over the columns
// where it is defined is the Plant Pathology 2020 metric.
std::vector<double> column_roc_auc(std::span<const float> scores, std::span<const uint8_t> targets, int64_t classes);
double mean_defined(const std::vector<double>& values);  // NaN when none is defined

}  // namespace convoy::train
