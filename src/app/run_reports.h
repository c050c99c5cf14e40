#pragma once
// Private to train/: the pictures and report.html of a finished run, and
// what they need from its config (Workflow::finish writes them).
#include <optional>
#include <string>
#include <vector>

#include "convoy/data/labeled_images.h"
#include "convoy/report/plots.h"
#include "convoy/train/evaluation.h"
#include "convoy/app/run.h"
#include "convoy/config/run_config.h"

namespace convoy::train {

// The class names and pixel normalisation of a run's data, for the pictures.
struct DataLook {
  std::string name;  // "Fashion-MNIST" or the data folder
  std::vector<std::string> classes;
  std::vector<float> mean, std;  // per channel
};
DataLook look_of(const RunConfig& c);

// The runs a report compares: this one and, for transfer learning with
// compare_with_scratch, the same model trained from random weights.
std::vector<report::NamedHistory> compared_runs(const RunConfig& c, const History& h,
                                                const std::optional<History>& scratch);
std::string compared_json(const std::vector<report::NamedHistory>& runs);

// curves.png, comparison.png (when compared), confusion.png,
// predictions.png and report.html into `dir`.
void write_reports(const std::string& dir, const RunConfig& c, const RunOutcome& out, const EvaluationReport& ev,
                   const data::LabeledImages& test, const std::vector<report::NamedHistory>& compared);

}  // namespace convoy::train
