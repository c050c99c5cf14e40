// `convoy predict` (predict.h): which input it was given, and the
// probabilities of each of its images.
#include "convoy/app/predict.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>

#include "convoy/core/error.h"
#include "convoy/core/path_kind.h"
#include "convoy/core/untrusted.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/data/idx.h"
#include "convoy/image/codec.h"
#include "convoy/io/atomic_file.h"
#include "convoy/records/manifest.h"
#include "convoy/app/run_checkpoint.h"
#include "convoy/train/evaluation.h"
#include "convoy/train/fit.h"
#include "convoy/app/image_data.h"
#include "app/restore.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

bool is_image_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// JPEG or PNG by its first bytes, whatever its name.
bool holds_image(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  uint8_t head[8] = {};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  return image::detect_format({head, static_cast<std::size_t>(in.gcount())}) != image::ImageFormat::unknown;
}

// Every image in `dir` and below it, sorted; ids relative to `dir`.
records::Manifest folder_manifest(const std::string& dir) {
  records::Manifest m;
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (hidden_entry(it->path())) {  // .DS_Store, macOS's ._photo.jpg, .ipynb_checkpoints/, __MACOSX/
      it.disable_recursion_pending();
      continue;
    }
    std::error_code link;
    if (it->is_regular_file(link) && is_image_name(it->path())) files.push_back(it->path());
  }
  require(!ec, "--input " + shown(dir) + ": cannot list the folder (" + ec.message() + ")");
  require(!files.empty(), "--input " + shown(dir) + ": no images (.jpg, .jpeg, .png) in it or below it");
  std::sort(files.begin(), files.end());
  const PathRoot rule(dir);  // as a data set's: a link may not lead outside the folder given
  for (const fs::path& f : files) {
    const std::string id = f.lexically_relative(dir).string();
    if (const auto why = rule.outside(id)) m.skipped.push_back(f.string() + ": leads outside " + dir + " (" + *why + ")");
    else m.entries.push_back({.id = id, .path = f.string(), .where = f.string()});
  }
  require(!m.entries.empty(), "--input " + shown(dir) + ": its images all lead outside it (symbolic links); copy them in");
  return m;
}

Predictions of_images(const RunCheckpoint& ck, const records::Manifest& m, const std::string& kind) {
  const ImagePredictions p = predict_manifest(*restore(ck), ck.config, m);
  return {.output = {}, .input_kind = kind, .classes = ck.config.data.classes, .ids = p.ids,
          .probabilities = p.probabilities, .skipped = p.skipped};
}

// A test CSV of ids, its images as the run's data.images/extension say
// (relative to the CSV's folder), written as data.id_column + classes.
Predictions of_csv(const RunCheckpoint& ck, const std::string& csv) {
  RunConfig c = ck.config;
  c.data.kind = "csv";  // a class-folder run reads the CSV with the csv defaults
  const records::Manifest m = records::read_csv_manifest(
      csv, {.id_column = c.data.id_column, .classes = {}, .image_dir = c.data.images, .extension = c.data.extension,
            .check_files = false, .on_bad_example = data::parse_on_bad_example(c.data.on_bad_example, "data"),
            .log = [](const std::string&) {}});
  Predictions p = of_images(ck, m, "csv");
  return p;
}

Predictions of_idx(const RunCheckpoint& ck, const std::string& path) {
  const Tensor raw = data::read_idx_u8(path);
  const Shape& want = data::kFashionMnistShape;
  require(raw.shape().size() == 3 && raw.dim(1) == want[1] && raw.dim(2) == want[2],
          path + ": images are " + to_string(raw.shape()) + ", the model takes [N, " + std::to_string(want[1]) + ", " +
              std::to_string(want[2]) + "]");
  // Labels are unknown; zeros keep the batch machinery unchanged.
  const data::LabeledImages images =
      data::from_u8(raw, Tensor(DType::u8, {raw.dim(0)}), data::kSeedMean, data::kSeedStd, path);
  auto exe = restore(ck);
  const int64_t classes = exe->compiled_for().output_size;
  Predictions p{.output = {}, .input_kind = "idx", .classes = data::kFashionMnistClasses};
  p.classes.resize(static_cast<std::size_t>(classes));  // a model of another class count: names as far as they go
  for (int64_t k = 10; k < classes; ++k) p.classes[k] = "class_" + std::to_string(k);
  std::vector<float> row_p(static_cast<std::size_t>(classes));
  const Loss loss = loss_kind(ck.config);
  for_each_output(*exe, images, [&](int64_t id, const float* row) {
    p.ids.push_back(std::to_string(id));
    output_probabilities(loss, row, classes, row_p.data());
    p.probabilities.insert(p.probabilities.end(), row_p.begin(), row_p.end());
  });
  return p;
}

// An existing --output is replaced only when it is an earlier predictions CSV
// of this run (the same header line): `--output train.csv` or `--output
// DIR/checkpoint.safetensors` would destroy a user's labels or the run.
void refuse_foreign_output(const std::string& path, const std::string& csv) {
  std::error_code ec;  // not followed: a link, like any special file, is the write's to refuse
  if (!fs::is_regular_file(fs::symlink_status(path, ec))) return;
  const std::string header = csv.substr(0, csv.find('\n') + 1);
  std::ifstream in(path, std::ios::binary);
  std::string first(header.size(), '\0');
  in.read(first.data(), static_cast<std::streamsize>(first.size()));
  first.resize(static_cast<std::size_t>(in.gcount()));
  if (first == header || (in.gcount() == 0 && in.eof())) return;  // ours (or empty): nothing of anyone's lost
  throw UserError("--output " + shown(path, 160) + ": exists and is not a predictions CSV of this run (its first "
                  "line is not '" + shown(header.substr(0, header.size() - 1), 80) +
                  "'); name a new file, or remove it first");
}

// --input must be a regular file here; anything else is named as what it is
// (/dev/zero, a FIFO, a folder), not as missing: "<path>: is a pipe (FIFO), not a file; <todo>".
void require_input_file(const std::string& path, const std::string& missing, const std::string& todo) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return;
  const std::string kind = path_kind(path);
  throw UserError("--input " + shown(path) + ": " + (kind == "missing" ? missing : "is " + kind + ", not a file") +
                  "; " + todo);
}

}  // namespace

Predictions predict(const std::string& dir, const PredictOptions& o) {
  const RunCheckpoint ck = load_latest_checkpoint(dir, std::cerr);
  const RunConfig& c = ck.config;
  Predictions p;
  std::string first_column = "file";
  if (!c.data.reads_images()) {
    require(!o.input.empty(), "predict: this run trained on Fashion-MNIST's IDX files; pass --input IMAGES.idx "
                              "(uint8 [N, 28, 28], raw or .gz)");
    require_input_file(o.input, "no such file", "pass an IDX file of images");
    require(!holds_image(o.input), "--input " + shown(o.input) +
                                       ": an image, but this run trained on Fashion-MNIST's IDX files; pass an IDX "
                                       "file of uint8 [N, 28, 28] images (a run on photos predicts on images)");
    p = of_idx(ck, o.input);
    first_column = "id";
  } else {
    std::error_code ec;
    const std::string input = o.input.empty() ? c.data.test_csv : o.input;
    require(!input.empty(), "predict: pass --input with an image, a folder of images or a test CSV (the run has no "
                            "data.test_csv)");
    const std::string path = o.input.empty() ? data_path(c, input, "data.test_csv") : input;
    if (fs::is_directory(path, ec)) {
      p = of_images(ck, folder_manifest(path), "folder");
    } else {
      require_input_file(path, "no such file or folder", "pass an image, a folder of images or a test CSV");
      if (holds_image(path)) {
        records::Manifest m;
        m.entries.push_back({.id = path, .path = path, .where = path});
        p = of_images(ck, m, "image");
      } else {
        require(fs::path(path).extension() == ".csv",
                "--input " + shown(path) + ": neither an image (JPEG, PNG), a folder of images nor a .csv of ids");
        p = of_csv(ck, path);
        first_column = c.data.id_column;
      }
    }
  }
  const bool csv = p.input_kind == "csv";
  p.output = !o.output.empty() ? o.output
             : (fs::path(dir) / (csv ? "submission.csv" : "predictions.csv")).string();
  ImagePredictions rows{.ids = p.ids, .probabilities = p.probabilities,
                        .classes = static_cast<int64_t>(p.classes.size()), .skipped = {}};
  std::string csv_text = predictions_csv(rows, first_column, p.classes);
  if (p.output == "-") {
    p.csv = std::move(csv_text);  // whole before a byte goes out: no half CSV on an error
  } else {
    refuse_foreign_output(p.output, csv_text);
    io::write_file_atomic(p.output, csv_text);
  }
  return p;
}

std::string top_k_table(const Predictions& p, int k) {
  const std::size_t classes = p.classes.size();
  k = std::clamp<int>(k, 1, static_cast<int>(classes));
  std::size_t width = 0;
  for (const auto& id : p.ids) width = std::max(width, id.size());
  std::string out;
  char cell[32];
  std::vector<std::size_t> order(classes);
  for (std::size_t r = 0; r < p.ids.size(); ++r) {
    const float* row = p.probabilities.data() + r * classes;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return row[a] > row[b]; });
    out += p.ids[r] + std::string(width - p.ids[r].size() + 2, ' ');
    for (int i = 0; i < k; ++i) {
      // A long name is cut on a character boundary (snprintf into the cell cut
      // it mid-character, and the probability after it), with an ellipsis.
      const std::string& name = p.classes[order[i]];
      const std::size_t keep = utf8_prefix_length(name, kShownChars);
      std::snprintf(cell, sizeof cell, " %.3f", row[order[i]]);
      out += (i ? "  " : "") + name.substr(0, keep) + (keep < name.size() ? "\u2026" : "") + cell;
    }
    out += "\n";
  }
  return out;
}

}  // namespace convoy::train
