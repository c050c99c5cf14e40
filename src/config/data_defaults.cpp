// `--data DIR` alone: the data's kind, and defaults that fit it (data_defaults.h).
#include "convoy/config/data_defaults.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <variant>

#include "convoy/core/error.h"
#include "convoy/core/path_kind.h"
#include "convoy/core/untrusted.h"
#include "convoy/image/codec.h"
#include "convoy/records/manifest.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

bool exists_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool has_idx(const fs::path& dir) {
  return exists_file(dir / "train-images-idx3-ubyte") || exists_file(dir / "train-images-idx3-ubyte.gz");
}

// Class folders: some subfolder with an image file somewhere below it.
bool has_class_folders(const fs::path& dir) {
  std::error_code ec;
  for (const auto& sub : fs::directory_iterator(dir, ec)) {
    if (hidden_entry(sub.path()) || !sub.is_directory(ec)) continue;
    for (auto it = fs::recursive_directory_iterator(sub.path(), ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (hidden_entry(it->path())) {
        it.disable_recursion_pending();
        continue;
      }
      std::string ext = it->path().extension().string();
      std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
      if (ext == ".jpg" || ext == ".jpeg" || ext == ".png") return true;
    }
  }
  return false;
}

void probe_first_image(DataFound& d, const records::Manifest& m) {
  d.classes = m.classes;
  d.images = static_cast<int64_t>(m.entries.size());
  const image::Image first = image::read_image(m.entries.front().path);
  d.width = first.width();
  d.height = first.height();
  d.channels = first.channels();
}

std::string list(const std::vector<std::string>& names, std::size_t most = 5) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + shown(names[i]);
  if (names.size() > most) out += ", ...";
  return out;
}

// The first image's size, the longer side brought down to at most 128, each
// side a multiple of 8 and at least 32 (plant_cnn halves it five times).
int64_t input_side(int side, double scale) {
  const auto v = static_cast<int64_t>(std::lround(side * scale / 8.0)) * 8;
  return std::clamp<int64_t>(v, 32, 4096);
}

// 32, halved while it is more than half of the training split (two steps an epoch at least).
int64_t batch_for(int64_t images, double validation_split) {
  const double train = static_cast<double>(images) * (1 - validation_split);
  int64_t batch = 32;
  while (batch > 1 && batch > train / 2) batch /= 2;
  return batch;
}

std::string format_number(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%g", v);
  return s;
}

}  // namespace

void require_data_folder(const std::string& dir, const std::string& named) {
  std::string todo = "pass the folder that holds the data";
  if (path_kind(dir) == "a file") {
    std::string ext = fs::path(dir).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (ext == ".csv")
      todo = "pass the folder that holds it: convoy reads DIR/train.csv and the images in DIR/images/ (a CSV of "
             "another name: --set data.kind=csv --set data.train_csv=NAME)";
    else if (ext == ".jpg" || ext == ".jpeg" || ext == ".png")
      todo = "pass the folder above the class folders (DIR/<class>/*.jpg); to classify one image, use convoy predict";
    else
      todo = "pass the folder that holds the data: class folders of photos, train.csv with images/, or Fashion-MNIST's "
             "IDX files";
  }
  require_folder(dir, named, todo);
}

DataFound find_data(const std::string& dir, const DataConfig& csv) {
  require_data_folder(dir, "--data ");
  DataFound d;
  if (has_idx(dir)) {
    d.kind = "idx";
  } else if (exists_file(fs::path(dir) / csv.train_csv)) {
    d.kind = "csv";
    if (exists_file(fs::path(dir) / "test.csv")) d.test_csv = "test.csv";
    // Read as the run will read it: the CSV keys given (data.extension '' for ids that are file names) count.
    probe_first_image(d, records::read_csv_manifest(path_in_data_folder(dir, csv.train_csv, "data.train_csv"),
                                                    {.id_column = csv.id_column,
                                                     .label_column = csv.label_column,
                                                     .image_dir = csv.images,
                                                     .extension = csv.extension,
                                                     .on_bad_example = data::OnBadExample::skip,
                                                     .log = [](const std::string&) {}}));
  } else if (has_class_folders(dir)) {
    d.kind = "folders";
    probe_first_image(d, records::read_folder_manifest(
                             dir, {.on_bad_example = data::OnBadExample::skip, .log = [](const std::string&) {}}));
  } else {
    throw UserError("--data " + shown(dir) +
                    ": not a data set convoy recognises; it reads a folder of class folders (DIR/<class>/*.jpg or "
                    ".png), a Kaggle CSV (DIR/train.csv, images in DIR/images/), Fashion-MNIST's IDX files "
                    "(DIR/train-images-idx3-ubyte[.gz]), or what a --config names (data.kind: tfrecord)");
  }
  return d;
}

std::string choose_from_data(RunConfig& c, const std::set<std::string>& given) {
  const auto has = [&](const char* key) { return given.count(key) > 0; };
  std::string found, chose;
  const auto chosen = [&](const std::string& what) { chose += (chose.empty() ? "" : ", ") + what; };
  bool detected = false;
  DataFound d;
  if (!has("data.kind") && has("data.dir")) {
    d = find_data(c.data_dir, c.data);
    c.data.kind = d.kind;
    detected = d.kind != "idx";
  }
  if (c.data.reads_images() && !has("model.name") && !has("model.layers")) {
    c.model = "plant_cnn";
    chosen("model plant_cnn");
  }
  if (!has("loss.name")) {
    const nn::Model model = build_model(c, model_input_shape(c), model_classes(c));
    const bool log_probabilities = std::holds_alternative<nn::LogSoftmax>(model.layers().back().layer);
    if (!log_probabilities) {
      c.loss = "categorical_crossentropy";
      c.from_logits = true;
      chosen("loss categorical_crossentropy from logits");
    }
  }
  if (detected) {
    found = shown(c.data_dir) + ": " + (d.kind == "csv" ? "a CSV of labels" : "class folders") + ", " +
            std::to_string(d.classes.size()) + " classes (" + list(d.classes) + "), " + std::to_string(d.images) +
            " images (the first " + std::to_string(d.width) + "x" + std::to_string(d.height) +
            (d.channels == 1 ? " gray" : " colour") + ")";
    if (!d.test_csv.empty() && !has("data.test_csv")) c.data.test_csv = d.test_csv;
    if (!has("data.width") && !has("data.height")) {
      const double scale = std::min(1.0, 128.0 / std::max(d.width, d.height));
      c.data.width = input_side(d.width, scale);
      c.data.height = input_side(d.height, scale);
    }
    if (!has("data.channels")) c.data.channels = d.channels == 1 ? 1 : 3;
    chosen("input " + std::to_string(c.data.channels) + "x" + std::to_string(c.data.height) + "x" +
           std::to_string(c.data.width));
    if (!has("data.mean") && !has("data.std")) c.data.mean = {0.5}, c.data.std = {0.25};
    if (!has("optimizer.name")) {
      c.optimizer = "adam";
      if (!has("optimizer.lr")) c.lr = 0.001;
      chosen("adam lr " + format_number(c.lr));
    }
    if (!has("training.batch_size")) {
      c.batch_size = batch_for(d.images, c.data.validation_split);
      chosen("batch " + std::to_string(c.batch_size));
    }
  }
  if (found.empty() && chose.empty()) return "";
  std::string line = "convoy: ";
  if (!found.empty()) line += found + "; ";
  return line + "chose " + chose + " (override with --model, --image-size, --optimizer, --set KEY=VALUE)";
}

}  // namespace convoy::train
