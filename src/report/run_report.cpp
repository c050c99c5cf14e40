#include "convoy/report/run_report.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "convoy/core/error.h"
#include "convoy/io/atomic_file.h"

namespace convoy::report {

namespace fs = std::filesystem;

std::string compared_json(const std::vector<NamedHistory>& runs) {
  if (runs.empty()) return "";
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : runs) {
    const auto& e = r.history.epochs;
    const auto best = std::max_element(e.begin(), e.end(), [](const auto& x, const auto& y) {
      return x.test_accuracy < y.test_accuracy;
    });
    a.push_back({{"run", r.name}, {"epochs", e.size()}, {"best_val_accuracy", best->test_accuracy},
                 {"best_epoch", best->epoch}, {"final_val_accuracy", e.back().test_accuracy},
                 {"final_val_loss", e.back().test_loss}});
  }
  return a.dump();
}

std::vector<std::string> write_run_report(const std::string& dir_name, const RunReport& r) {
  require(!r.history.epochs.empty(), "write_run_report: the history has no epochs; fit first");
  const fs::path dir(dir_name);
  const train::History& h = r.history;
  const train::EvaluationReport* ev = r.evaluation ? &*r.evaluation : nullptr;
  // Checked before anything is written, so a mistake leaves no half-written report.
  if (ev && r.examples) {
    require(ev->predicted.size() == static_cast<std::size_t>(r.examples->size()),
            "write_run_report: the evaluation scored " + std::to_string(ev->predicted.size()) +
                " examples but `examples` holds " + std::to_string(r.examples->size()) +
                "; pass the images it scored");
    require(!r.mean.empty() && !r.std.empty(), "write_run_report: mean and std need a value (one, or one per channel)");
  }
  std::vector<std::string> classes = r.classes;
  if (classes.empty() && ev)
    for (int64_t k = 0; k < ev->classes; ++k) classes.push_back(std::to_string(k));

  RunInfo info = r.info;
  info.evaluation_json = ev ? train::evaluation_json(*ev, classes) : "";
  info.compared_json = compared_json(r.compared);
  io::write_file_atomic((dir / "summary.json").string(), run_summary_json(info, h));

  write_curves_png((dir / "curves.png").string(), h);
  std::vector<std::string> images = {"curves.png"};
  if (!r.compared.empty()) {
    write_comparison_png((dir / "comparison.png").string(), r.compared);
    images.push_back("comparison.png");
  }
  if (ev && r.examples) {
    const data::LabeledImages& x = *r.examples;
    const auto labels = x.labels.data<int32_t>();
    // One mean and std serve every channel; otherwise one per channel.
    const auto per_channel = [&](const std::vector<float>& v) {
      return static_cast<int64_t>(v.size()) == x.images.dim(1) ? v : std::vector<float>{};
    };
    write_predictions_png((dir / "predictions.png").string(),
                          {.images = x.images.data<float>().data(), .count = x.size(), .height = x.images.dim(2),
                           .width = x.images.dim(3), .labels = labels.data(), .predicted = ev->predicted.data(),
                           .mean = r.mean.at(0), .std = r.std.at(0), .class_names = classes,
                           .channels = x.images.dim(1), .channel_mean = per_channel(r.mean),
                           .channel_std = per_channel(r.std)});
    images.push_back("predictions.png");
  }
  if (ev) {
    write_confusion_png((dir / "confusion.png").string(), ev->confusion, classes);
    images.push_back("confusion.png");
  }
  write_report_html((dir / "report.html").string(),
                    {.title = r.title.empty() ? "convoy: " + info.model : r.title, .device = info.device,
                     .config_json = r.config_json,
                     .class_scores = ev ? train::class_scores(*ev, classes) : std::vector<train::ClassScores>{},
                     .mean_roc_auc = ev ? ev->mean_roc_auc : 0, .threads = info.threads, .images = images,
                     .compared = r.compared},
                    h);
  std::vector<std::string> files = {"summary.json"};
  files.insert(files.end(), images.begin(), images.end());
  files.push_back("report.html");
  return files;
}

}  // namespace convoy::report
