#pragma once
// The report files of a finished run, written together: what
// `convoy train --out DIR` leaves at the end (app's Workflow::finish calls
// this), and what a program that fits its own model (train::KerasModel, fit)
// can write for it:
//
//   report::RunReport r{.info = {.model = "my_cnn", .device = "cpu", .epochs = 5},
//                       .history = model.history(), .classes = names};
//   r.evaluation = train::evaluate_report(model.executable(), test, Loss::nll);
//   r.examples = &test;
//   report::write_run_report("out", r);   // summary.json, curves.png, ..., report.html
#include <optional>
#include <string>
#include <vector>

#include "convoy/data/labeled_images.h"
#include "convoy/report/plots.h"
#include "convoy/report/run_summary.h"
#include "convoy/train/callbacks.h"
#include "convoy/train/evaluation.h"

namespace convoy::report {

struct RunReport {
  // summary.json's header; its evaluation_json and compared_json are filled
  // from `evaluation` and `compared` below.
  RunInfo info;
  train::History history;
  // The kept weights scored on `examples` (train::evaluate_report): the
  // confusion matrix, the per-class table and summary.json's "evaluation".
  // Without it: no confusion.png and no predictions.png.
  std::optional<train::EvaluationReport> evaluation;
  // The images `evaluation` scored, normalised as the model saw them: the
  // first 25 become predictions.png. nullptr: no predictions.png.
  const data::LabeledImages* examples = nullptr;
  std::vector<std::string> classes;  // in label order; empty: "0", "1", ...
  // How `examples` were normalised (x = (pixel - mean) / std), per channel or
  // one for all, so predictions.png shows the pictures as they were.
  std::vector<float> mean = {0}, std = {1};
  std::string title;        // report.html's title; empty: "convoy: <info.model>"
  std::string config_json;  // the run's settings, shown in report.html; empty: none
  // Other runs of the same data (transfer learning against training from
  // scratch): comparison.png and a table; empty: neither.
  std::vector<NamedHistory> compared;
};

// Writes into the existing folder `dir`, each file atomically: summary.json,
// curves.png, comparison.png (with compared runs), predictions.png and
// confusion.png (with an evaluation), report.html. Returns the names written,
// in that order. A run without epochs is a UserError (there is nothing to plot).
std::vector<std::string> write_run_report(const std::string& dir, const RunReport& report);

// summary.json's "compared": each run's epochs, best and final validation
// figures, as a JSON array; empty for no runs.
std::string compared_json(const std::vector<NamedHistory>& runs);

}  // namespace convoy::report
