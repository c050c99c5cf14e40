#pragma once
// `convoy train --data DIR` without a config: what DIR holds (class folders
// of images, a Kaggle CSV with an image folder, Fashion-MNIST's IDX files),
// and the settings a run on it gets for every key the user left out
// (docs/workflow.md, "From a folder of photos").
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "convoy/config/run_config.h"

namespace convoy::train {

struct DataFound {
  std::string kind;      // idx, csv or folders
  std::string test_csv;  // csv: "test.csv" when DIR has one
  int64_t images = 0;    // labelled images (csv, folders)
  std::vector<std::string> classes;
  int width = 0, height = 0, channels = 0;  // of the first image (csv, folders)
};

// A UserError naming the kinds convoy reads when DIR holds none of them.
// A CSV (`csv.train_csv`, default train.csv) is read with the CSV keys of `csv`.
DataFound find_data(const std::string& dir, const DataConfig& csv = {});

// Unless `dir` is a folder, a UserError "<named><dir>: <what it is>; <what to
// pass>": for a file it says what to give instead (a CSV's folder, an image's
// class folders' parent).
void require_data_folder(const std::string& dir, const std::string& named);

// Fills the keys of `config` that `given` (dotted keys set by a file, --set
// or a flag) leaves out, from its data:
//  - data.kind not given and data.dir given: the kind find_data sees; for
//    images then also the input size (the first image's, the longer side at
//    most 128), channels, mean/std, the model (plant_cnn), optimizer (adam,
//    lr 0.001) and batch size (32, less for a small data set);
//  - an image kind given without a model: plant_cnn (the default seed_cnn
//    reads 28x28 gray images);
//  - no loss.name: the loss the model's last layer calls for (nll after a
//    log_softmax, else categorical cross-entropy from logits).
// Returns one line saying what was found and chosen ("" when nothing was).
std::string choose_from_data(RunConfig& config, const std::set<std::string>& given);

}  // namespace convoy::train
