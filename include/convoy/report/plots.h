#pragma once
// What people look at after a run: PNG charts drawn with cairo, and an HTML
// report that shows them. Every file is written atomically.
#include <cstdint>
#include <string>
#include <vector>

#include "convoy/train/callbacks.h"
#include "convoy/train/evaluation.h"

namespace convoy::report {

// Two panels: loss and accuracy per epoch, training and validation.
void write_curves_png(const std::string& path, const train::History& history);

// Runs side by side (transfer learning against training from scratch):
// validation loss and accuracy per epoch, one line per run.
struct NamedHistory {
  std::string name;
  train::History history;
};
void write_comparison_png(const std::string& path, const std::vector<NamedHistory>& runs);

// The seed's picture: a grid of images, each titled with its actual and
// predicted class, blue when right and red when wrong. `images` are
// normalised [n, channels, h, w] floats (1: gray, 3: RGB); pixel = x * std +
// mean (per channel when channel_mean/channel_std are given), clamped to [0, 1].
struct PredictionGrid {
  const float* images = nullptr;
  int64_t count = 0, height = 0, width = 0;
  const int32_t* labels = nullptr;
  const int32_t* predicted = nullptr;
  float mean = 0, std = 1;
  std::vector<std::string> class_names;
  int64_t channels = 1;
  std::vector<float> channel_mean, channel_std;  // empty: mean and std for every channel
  int rows = 5, cols = 5;
};
void write_predictions_png(const std::string& path, const PredictionGrid& grid);

// A k x k confusion matrix (row = actual, column = predicted), counts shown,
// shaded by each row's share.
void write_confusion_png(const std::string& path, const std::vector<int64_t>& matrix,
                         const std::vector<std::string>& class_names);

struct ReportInfo {
  std::string title, device, config_json;
  std::vector<train::ClassScores> class_scores;  // empty: no table
  double mean_roc_auc = 0;               // over the classes where it is defined
  int threads = 0;
  std::vector<std::string> images;  // file names beside the report
  std::vector<NamedHistory> compared;  // other runs of the same data (e.g. from scratch): a table of each one's best epoch
};
void write_report_html(const std::string& path, const ReportInfo& info, const train::History& history);

}  // namespace convoy::report
