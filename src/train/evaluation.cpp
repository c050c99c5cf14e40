#include "convoy/train/evaluation.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "convoy/train/fit.h"

namespace convoy::train {

void output_probabilities(Loss loss, const float* row, int64_t classes, float* p) {
  if (loss == Loss::binary_cross_entropy) {
    for (int64_t j = 0; j < classes; ++j) p[j] = 1 / (1 + std::exp(-row[j]));
    return;
  }
  // Log-probabilities are logits whose log-sum-exp is 0: one softmax serves both.
  const float mx = *std::max_element(row, row + classes);
  float sum = 0;
  for (int64_t j = 0; j < classes; ++j) sum += p[j] = std::exp(row[j] - mx);
  for (int64_t j = 0; j < classes; ++j) p[j] /= sum;
}

EvaluationReport evaluate_report(Executable& exe, const data::LabeledImages& data, Loss loss) {
  EvaluationReport r;
  r.examples = data.size();
  r.classes = exe.compiled_for().output_size;
  const int64_t k = r.classes;
  std::vector<float> probabilities(static_cast<std::size_t>(r.examples * k));
  const Metrics m = evaluate(exe, data);  // loss and accuracy as the trainer computes them
  r.loss = m.mean_loss();
  r.accuracy = m.accuracy();
  for_each_output(exe, data, [&](int64_t i, const float* row) {
    float* p = probabilities.data() + i * k;
    output_probabilities(loss, row, k, p);
    r.predicted.push_back(static_cast<int32_t>(std::max_element(p, p + k) - p));
  });
  const auto labels = data.labels.data<int32_t>();
  r.top_k = std::min<int64_t>(5, std::max<int64_t>(1, k - 1));
  r.top_k_accuracy = top_k_accuracy(probabilities, k, labels, r.top_k);
  r.confusion = confusion_matrix(labels, r.predicted, k);
  r.per_class = per_class_scores(r.confusion, k);
  std::vector<uint8_t> onehot(probabilities.size(), 0);
  for (std::size_t i = 0; i < labels.size(); ++i) onehot[i * k + labels[i]] = 1;
  r.roc_auc = column_roc_auc(probabilities, onehot, k);
  r.mean_roc_auc = mean_defined(r.roc_auc);
  return r;
}

std::string evaluation_json(const EvaluationReport& r, const std::vector<std::string>& names) {
  auto number = [](double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); };
  nlohmann::json per_class = nlohmann::json::array();
  for (int64_t c = 0; c < r.classes; ++c)
    per_class.push_back({{"class", c < static_cast<int64_t>(names.size()) ? names[c] : std::to_string(c)},
                         {"precision", r.per_class.precision[c]},
                         {"recall", r.per_class.recall[c]},
                         {"f1", r.per_class.f1[c]},
                         {"support", r.per_class.support[c]},
                         {"roc_auc", number(r.roc_auc[c])}});
  return nlohmann::json{{"examples", r.examples},
                        {"loss", r.loss},
                        {"accuracy", r.accuracy},
                        {"top_" + std::to_string(r.top_k) + "_accuracy", r.top_k_accuracy},
                        {"mean_roc_auc", number(r.mean_roc_auc)},
                        {"per_class", per_class},
                        {"confusion", r.confusion}}
      .dump();
}

}  // namespace convoy::train
