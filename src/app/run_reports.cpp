#include "app/run_reports.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "convoy/data/fashion_mnist.h"
#include "convoy/data/idx.h"

namespace convoy::train {

namespace fs = std::filesystem;

DataLook look_of(const RunConfig& c) {
  if (!c.data.reads_images()) return {"Fashion-MNIST", data::kFashionMnistClasses, {data::kSeedMean}, {data::kSeedStd}};
  DataLook look{c.data_dir, c.data.classes, {}, {}};
  for (int64_t k = 0; k < c.data.channels; ++k) {
    const auto pick = [&](const std::vector<double>& v) { return static_cast<float>(v.size() == 1 ? v[0] : v[k]); };
    look.mean.push_back(pick(c.data.mean));
    look.std.push_back(pick(c.data.std));
  }
  return look;
}

std::vector<report::NamedHistory> compared_runs(const RunConfig& c, const History& h, const std::optional<History>& scratch) {
  if (!scratch || scratch->epochs.empty() || h.epochs.empty()) return {};
  return {{c.pretrained.empty() ? "this run" : "pretrained", h}, {"from scratch", *scratch}};
}

std::string compared_json(const std::vector<report::NamedHistory>& runs) {
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

void write_reports(const std::string& dir_name, const RunConfig& c, const RunOutcome& out, const EvaluationReport& ev,
                   const data::LabeledImages& test, const std::vector<report::NamedHistory>& compared) {
  const fs::path dir(dir_name);
  const History& h = out.history;
  const DataLook look = look_of(c);
  report::write_curves_png((dir / "curves.png").string(), h);
  std::vector<std::string> images = {"curves.png"};
  if (!compared.empty()) {
    report::write_comparison_png((dir / "comparison.png").string(), compared);
    images.push_back("comparison.png");
  }
  images.insert(images.end(), {"predictions.png", "confusion.png"});
  const std::vector<int32_t>& predicted = ev.predicted;
  const auto labels = test.labels.data<int32_t>();
  report::write_confusion_png((dir / "confusion.png").string(), ev.confusion, look.classes);
  report::write_predictions_png((dir / "predictions.png").string(),
                            {.images = test.images.data<float>().data(), .count = test.size(),
                             .height = test.images.dim(2), .width = test.images.dim(3), .labels = labels.data(),
                             .predicted = predicted.data(), .mean = look.mean[0], .std = look.std[0],
                             .class_names = look.classes, .channels = test.images.dim(1),
                             .channel_mean = look.mean, .channel_std = look.std});
  report::write_report_html((dir / "report.html").string(),
                        {.title = "convoy: " + c.model + " on " + look.name, .device = out.device,
                         .config_json = run_config_json(c), .class_scores = class_scores(ev, look.classes),
                         .mean_roc_auc = ev.mean_roc_auc, .threads = out.threads, .images = images,
                         .compared = compared},
                        h);
}

}  // namespace convoy::train
