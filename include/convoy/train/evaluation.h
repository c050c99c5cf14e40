#pragma once
// A whole evaluation pass with every classification metric: what
// summary.json, confusion.png and `convoy evaluate` report.
#include <cstdint>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/data/labeled_images.h"
#include "convoy/train/metrics.h"

namespace convoy::train {

struct EvaluationReport {
  int64_t examples = 0, classes = 0;
  double loss = 0, accuracy = 0;
  int64_t top_k = 0;      // k of top_k_accuracy: 5, or fewer when there are few classes
  double top_k_accuracy = 0;
  std::vector<int32_t> predicted;  // arg-max class per example, in order
  std::vector<int64_t> confusion;  // [true][predicted]
  PerClass per_class;
  std::vector<double> roc_auc;     // one-vs-rest, per class (NaN: class absent)
  double mean_roc_auc = 0;         // over the classes where it is defined
};

// Probabilities from one output row, as the loss reads the outputs:
// exp (log-probabilities), softmax (logits) or per-class sigmoid (binary).
void output_probabilities(Loss loss, const float* row, int64_t classes, float* probabilities);

// Runs every example of `data` in inference mode and scores the outputs.
EvaluationReport evaluate_report(Executable& exe, const data::LabeledImages& data, Loss loss);

// {"loss", "accuracy", "top_5_accuracy", "mean_roc_auc", "per_class": [...]}
std::string evaluation_json(const EvaluationReport& report, const std::vector<std::string>& class_names);

// One class's scores on the evaluation split, for the report's table.
struct ClassScores {
  std::string name;
  double precision = 0, recall = 0, f1 = 0, roc_auc = 0;  // roc_auc NaN: undefined (class absent)
  int64_t support = 0;
};

// Each class's scores, named, for the report (report::ReportInfo::class_scores).
std::vector<ClassScores> class_scores(const EvaluationReport& report, const std::vector<std::string>& class_names);

// The console's final block: "<split> (N images): accuracy, mean ROC AUC,
// top-k accuracy", then one row per class (precision, recall, F1, ROC AUC,
// support).
std::string evaluation_text(const EvaluationReport& report, const std::vector<std::string>& class_names,
                            const std::string& split);

}  // namespace convoy::train
