// The final evaluation as people read it: the console's block and the
// report's table (evaluation.h).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "convoy/train/evaluation.h"

namespace convoy::train {

std::vector<ClassScores> class_scores(const EvaluationReport& r, const std::vector<std::string>& names) {
  std::vector<ClassScores> out;
  for (int64_t k = 0; k < r.classes; ++k)
    out.push_back({.name = k < static_cast<int64_t>(names.size()) ? names[k] : std::to_string(k),
                   .precision = r.per_class.precision[k], .recall = r.per_class.recall[k], .f1 = r.per_class.f1[k],
                   .roc_auc = r.roc_auc[k], .support = r.per_class.support[k]});
  return out;
}

std::string evaluation_text(const EvaluationReport& r, const std::vector<std::string>& names, const std::string& split) {
  const std::vector<ClassScores> scores = class_scores(r, names);
  std::size_t width = 5;
  for (const auto& s : scores) width = std::max(width, s.name.size());
  char line[256];
  std::snprintf(line, sizeof line, "%s (%lld images): accuracy %.2f%%, mean ROC AUC %.4f, top-%lld accuracy %.2f%%\n",
                split.c_str(), static_cast<long long>(r.examples), 100 * r.accuracy, r.mean_roc_auc,
                static_cast<long long>(r.top_k), 100 * r.top_k_accuracy);
  std::string out = line;
  std::snprintf(line, sizeof line, "  %-*s  precision  recall     F1  ROC AUC  support\n", static_cast<int>(width), "class");
  out += line;
  for (const auto& s : scores) {
    char auc[16] = "    n/a";
    if (std::isfinite(s.roc_auc)) std::snprintf(auc, sizeof auc, "%7.4f", s.roc_auc);
    std::snprintf(line, sizeof line, "  %-*s  %9.3f  %6.3f  %5.3f  %s  %7lld\n", static_cast<int>(width), s.name.c_str(),
                  s.precision, s.recall, s.f1, auc, static_cast<long long>(s.support));
    out += line;
  }
  return out;
}

}  // namespace convoy::train
