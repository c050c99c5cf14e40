#pragma once
// Private to app/: what a finished run's report (report/run_report.h) needs
// from its config; Workflow::finish writes it.
#include <optional>
#include <string>
#include <vector>

#include "convoy/report/plots.h"
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

}  // namespace convoy::train
