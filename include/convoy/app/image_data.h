#pragma once
// The image workflow behind `convoy train` for data.kind csv, folders and
// tfrecord (docs/workflow.md): a manifest or TFRecord files, a stratified
// train/validation split, and the input pipeline
//
//   source -> decode (DCT-scaled) + resize -> cache -> augment (train only)
//          -> to_float_chw -> [one-hot] -> shuffle -> batch -> prefetch
//
// that fit trains on, plus submission.csv for a test CSV.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/data/labeled_images.h"
#include "convoy/records/manifest.h"
#include "convoy/train/fit.h"
#include "convoy/config/run_config.h"

namespace convoy::train {

struct ImageData {
  std::vector<std::string> classes;  // label order
  bool one_hot = false;              // labels came as 0/1 columns: training batches carry one-hot rows
  std::optional<TrainingData> training;  // only when asked for
  int64_t train_examples = 0;
  std::vector<double> class_weights;  // data.class_weight, in label order; empty: unweighted
  // Decoded, resized and normalised once, in split order: fit's validation
  // pass, the final report, predictions.png.
  data::LabeledImages validation;
  // Every example left out under on_bad_example: skip, "<file or row>: why".
  std::vector<std::string> skipped;
};

// Reads config.data (an image kind), checks every image once (a bad one is a
// UserError naming the file or row, or under skip is counted in `skipped`),
// and builds the training pipeline when `with_training` (batches of
// config.batch_size, shuffled by config.seed) — otherwise only validation.
ImageData load_image_data(const RunConfig& config, bool with_training);

// Class probabilities for every image of `manifest` (its labels unused),
// decoded and normalised as the run's data: `ids` in manifest order,
// `probabilities` [rows, classes] (each row sums to 1). A bad image fails
// or, under on_bad_example: skip, keeps its row with equal probabilities
// and is named in `skipped`.
struct ImagePredictions {
  std::vector<std::string> ids;
  std::vector<float> probabilities;
  int64_t classes = 0;
  std::vector<std::string> skipped;
};
ImagePredictions predict_manifest(Executable& exe, const RunConfig& config, const records::Manifest& manifest);
// `first_column` (the ids), then one column per class, 6 decimals.
std::string predictions_csv(const ImagePredictions& predictions, const std::string& first_column,
                            const std::vector<std::string>& classes);

// Class probabilities for every row of `test_csv` (its id column as
// data.id_column; images as the training CSV's), in file order, written
// atomically to `output_csv`: the id column and one column per class, each
// row summing to 1 (softmax of logits). Under on_bad_example: skip an image
// that cannot be decoded keeps its row, with equal probabilities, and is
// added to `skipped`. Returns the number of rows.
int64_t write_submission(Executable& exe, const RunConfig& config, const std::string& test_csv,
                         const std::string& output_csv, std::vector<std::string>* skipped = nullptr);

// Under on_bad_example: fail, decodes every image of data.test_csv once (and
// drops the pixels), so that a bad one fails the run before its first step
// rather than after training; under skip, or without a test CSV, nothing.
void check_test_images(const RunConfig& config);

// A path of the config's data: as is when absolute, else under data.dir
// (path_in_data_folder: a link leading out of it is refused). `key` names
// the setting it came from ("data.train_csv") in that refusal.
std::string data_path(const RunConfig& config, const std::string& path, const char* key);

}  // namespace convoy::train
