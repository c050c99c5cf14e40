#pragma once
// Image datasets listed by a manifest: which files, which labels. Two layouts:
//
//  - A CSV plus an image folder, as Kaggle's Plant Pathology 2020: train.csv
//    with `image_id` and one 0/1 column per class (healthy, multiple_diseases,
//    rust, scab), test.csv with `image_id` only, images at
//    <csv folder>/images/<image_id>.jpg. Or a CSV with one label column of
//    class names.
//  - A folder per class, as Keras' image_dataset_from_directory:
//    root/<class>/**/*.{jpg,jpeg,png}, classes and files sorted by name.
//
// Reading a manifest checks every row (and that each image exists) up front:
// a bad row is one UserError naming the file and line, or, under
// on_bad_example: skip, is left out, named in Manifest::skipped and logged in
// one line. manifest_dataset turns a manifest into a Dataset.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "convoy/data/bad_examples.h"
#include "convoy/data/dataset.h"
#include "convoy/image/codec.h"

namespace convoy::records {

enum class LabelKind {
  none,     // unlabeled (a test set)
  index,    // one class per example: `label` i32 []
  one_hot,  // one 0/1 value per class: `label` f32 [classes] (several 1s: multi-label)
};

struct ManifestEntry {
  std::string id;              // the CSV's id, or the path under a class-folder root
  std::string path;            // the image file
  int32_t label = -1;          // LabelKind::index
  std::vector<float> one_hot;  // LabelKind::one_hot
  std::string where;           // "train.csv line 7" or the path, for messages
};

struct Manifest {
  std::vector<std::string> classes;  // in label order
  LabelKind label_kind = LabelKind::none;
  std::vector<ManifestEntry> entries;
  std::vector<std::string> skipped;  // under skip: each row left out, and why
};

struct CsvManifestOptions {
  std::string id_column = "image_id";
  // Empty: one 0/1 column per class. Otherwise the column holding class names.
  std::string label_column;
  // One 0/1 column per class: the class columns (default: every column but
  // the id; none at all means unlabeled, as test.csv). Label column: the class
  // names in label order (default: the distinct names found, sorted; pass
  // them to keep train and validation CSVs consistent).
  std::vector<std::string> classes;
  std::string image_dir = "images";  // relative to the CSV's folder, unless absolute
  std::string extension = ".jpg";    // appended to the id to name the image file
  bool check_files = true;           // every image must exist now (and hold at most max_image_bytes)
  uint64_t max_image_bytes = image::kDefaultMaxImageBytes;
  data::OnBadExample on_bad_example = data::OnBadExample::fail;
  data::LogFn log = data::stderr_log();  // where the skip summary goes
  // 0/1 columns: a row with more than one 1 is a bad row (the image workflow
  // trains one class per image; shards keep multi-label rows).
  bool one_class_per_row = false;
};
Manifest read_csv_manifest(const std::string& csv_path, const CsvManifestOptions& options = {});
// The folder a CSV's images are read from: `image_dir` relative to the CSV's
// folder, unless absolute (CsvManifestOptions::image_dir).
std::string csv_image_folder(const std::string& csv_path, const std::string& image_dir);

struct FolderManifestOptions {
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png"};  // matched ignoring case
  std::vector<std::string> classes;  // default: every subfolder of the root, sorted by name
  // A file linked out of the root (or a link that cannot be followed) is a bad
  // entry: fail, or under skip left out, listed in Manifest::skipped and
  // logged in one line. A class folder leading out is an error either way.
  data::OnBadExample on_bad_example = data::OnBadExample::fail;
  data::LogFn log = data::stderr_log();
};
Manifest read_folder_manifest(const std::string& root, const FolderManifestOptions& options = {});

struct ManifestDatasetOptions {
  // true: the source reads each file into `image_bytes` u8 [n], so decoding is
  // a pure map; false: only `file` (the path) is given.
  bool read_bytes = true;
  uint64_t max_image_bytes = image::kDefaultMaxImageBytes;  // a larger file is refused before it is read
  data::OnBadExample on_bad_example = data::OnBadExample::fail;
  std::shared_ptr<data::SkippedExamples> skipped = std::make_shared<data::SkippedExamples>();
  data::LogFn log = data::stderr_log();
};
// Examples in manifest order: `image_bytes` u8 [n], `label` (i32 [] or
// f32 [classes]; none when unlabeled), `id` and `file` texts. A file that
// cannot be read fails (or is skipped) when it is reached.
data::Dataset manifest_dataset(Manifest manifest, ManifestDatasetOptions options = {});

// Splits by label so each class (each one-hot pattern) gives
// round(validation_fraction × its count) entries to validation, chosen by
// `seed`; both halves keep the manifest's order. The same manifest and seed
// always give the same split.
struct ManifestSplit {
  Manifest train, validation;
};
ManifestSplit stratified_split(const Manifest& manifest, double validation_fraction, uint64_t seed);

}  // namespace convoy::records
