#include "convoy/train/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "convoy/core/error.h"

namespace convoy::train {
namespace {

void require_rows(std::size_t values, int64_t classes, std::size_t rows, const char* what) {
  require(classes > 0 && values == rows * static_cast<std::size_t>(classes),
          std::string(what) + ": " + std::to_string(values) + " scores do not make " + std::to_string(rows) + " rows of " +
              std::to_string(classes) + " classes");
}

}  // namespace

double top_k_accuracy(std::span<const float> scores, int64_t classes, std::span<const int32_t> labels, int64_t k) {
  require_rows(scores.size(), classes, labels.size(), "top-k accuracy");
  require(k >= 1, "top-k accuracy: k must be at least 1");
  if (labels.empty()) return 0;
  int64_t hits = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const float* row = scores.data() + i * classes;
    const int32_t y = labels[i];
    if (std::isnan(row[y])) continue;  // a NaN score ranks nowhere: never a hit
    // The true class is in the top k when fewer than k classes beat it.
    int64_t better = 0;
    for (int64_t j = 0; j < classes; ++j) better += row[j] > row[y] || (row[j] == row[y] && j > y);
    hits += better < k;
  }
  return static_cast<double>(hits) / static_cast<double>(labels.size());
}

std::vector<int64_t> confusion_matrix(std::span<const int32_t> labels, std::span<const int32_t> predicted,
                                      int64_t classes) {
  require(labels.size() == predicted.size(), "confusion matrix: labels and predictions differ in count");
  std::vector<int64_t> counts(static_cast<std::size_t>(classes * classes), 0);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    require(labels[i] >= 0 && labels[i] < classes && predicted[i] >= 0 && predicted[i] < classes,
            "confusion matrix: class index outside [0, " + std::to_string(classes) + ")");
    ++counts[labels[i] * classes + predicted[i]];
  }
  return counts;
}

PerClass per_class_scores(std::span<const int64_t> confusion, int64_t classes) {
  require(confusion.size() == static_cast<std::size_t>(classes * classes), "per-class scores: not a square matrix");
  PerClass out;
  for (int64_t c = 0; c < classes; ++c) {
    int64_t tp = confusion[c * classes + c], predicted = 0, actual = 0;
    for (int64_t j = 0; j < classes; ++j) {
      predicted += confusion[j * classes + c];
      actual += confusion[c * classes + j];
    }
    const double p = predicted ? static_cast<double>(tp) / predicted : 0.0;
    const double r = actual ? static_cast<double>(tp) / actual : 0.0;
    out.precision.push_back(p);
    out.recall.push_back(r);
    out.f1.push_back(p + r > 0 ? 2 * p * r / (p + r) : 0.0);
    out.support.push_back(actual);
  }
  return out;
}

double roc_auc(std::span<const float> scores, std::span<const uint8_t> positive) {
  require(scores.size() == positive.size(), "ROC AUC: scores and truth differ in count");
  const std::size_t n = scores.size();
  // A NaN score has no rank (and would break the sort's ordering): the AUC is
  // undefined then, as when one side is empty.
  if (std::any_of(scores.begin(), scores.end(), [](float s) { return std::isnan(s); }))
    return std::numeric_limits<double>::quiet_NaN();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // Mann-Whitney: sum of the positives' ranks, tied scores sharing their mean rank.
  double rank_sum = 0;
  int64_t positives = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;
    for (std::size_t t = i; t < j; ++t)
      if (positive[order[t]]) {
        rank_sum += mean_rank;
        ++positives;
      }
    i = j;
  }
  const int64_t negatives = static_cast<int64_t>(n) - positives;
  if (positives == 0 || negatives == 0) return std::numeric_limits<double>::quiet_NaN();
  return (rank_sum - static_cast<double>(positives) * (positives + 1) / 2) /
         (static_cast<double>(positives) * static_cast<double>(negatives));
}

std::vector<double> column_roc_auc(std::span<const float> scores, std::span<const uint8_t> targets, int64_t classes) {
  require(scores.size() == targets.size(), "ROC AUC: scores and targets differ in count");
  require_rows(scores.size(), classes, scores.size() / std::max<int64_t>(classes, 1), "ROC AUC");
  const std::size_t rows = scores.size() / classes;
  std::vector<double> out;
  std::vector<float> column(rows);
  std::vector<uint8_t> truth(rows);
  for (int64_t c = 0; c < classes; ++c) {
    for (std::size_t i = 0; i < rows; ++i) {
      column[i] = scores[i * classes + c];
      truth[i] = targets[i * classes + c];
    }
    out.push_back(roc_auc(column, truth));
  }
  return out;
}

double mean_defined(const std::vector<double>& values) {
  double sum = 0;
  int64_t n = 0;
  for (double v : values)
    if (!std::isnan(v)) {
      sum += v;
      ++n;
    }
  return n ? sum / static_cast<double>(n) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace convoy::train
