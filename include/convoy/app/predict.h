#pragma once
// `convoy predict`: class probabilities from a trained run's checkpoint for
// new inputs, prepared as the run prepared its data (decode, resize,
// normalisation from its config).
#include <cstdint>
#include <string>
#include <vector>

namespace convoy::train {

struct PredictOptions {
  // An image run: an image file (JPEG, PNG), a folder (every image in it and
  // below it, sorted) or a test CSV of ids (as data.test_csv; empty: the
  // run's data.test_csv). A Fashion-MNIST run: an IDX file of uint8 [N, 28, 28].
  std::string input;
  // Empty: DIR/predictions.csv for images, DIR/submission.csv for a CSV.
  // "-": no file; the CSV is returned in Predictions::csv, for standard output.
  std::string output;
};

struct Predictions {
  std::string output;                // the file written ("-": none, see csv)
  std::string csv;                   // with output "-": the whole CSV, written nowhere yet
  std::string input_kind;            // "image", "folder", "csv" or "idx"
  std::vector<std::string> classes;  // the run's, in label order
  std::vector<std::string> ids;      // first column: the file (relative to a folder input), id or row index
  std::vector<float> probabilities;  // [ids, classes], each row sums to 1
  std::vector<std::string> skipped;  // under on_bad_example: skip, images that could not be read
};

// Writes `output` atomically (or returns it in `csv` for "-"): the first column (`file` for images, the CSV's
// id column, `id` for IDX rows), then one probability column per class, as a
// Kaggle submission. A missing or unreadable input is one UserError naming it.
Predictions predict(const std::string& checkpoint_dir, const PredictOptions& options);

// The `k` most probable classes of each row, one line per input:
// "x.jpg  healthy 0.912  rust 0.061  scab 0.027".
std::string top_k_table(const Predictions& p, int k);

}  // namespace convoy::train
