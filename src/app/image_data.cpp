#include "convoy/app/image_data.h"

#include <glob.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <set>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/data/bad_examples.h"
#include "convoy/data/transforms.h"
#include "convoy/image/maps.h"
#include "convoy/io/atomic_file.h"
#include "convoy/records/csv.h"
#include "convoy/records/manifest.h"
#include "convoy/records/tfrecord_dataset.h"
#include "convoy/train/evaluation.h"
#include "app/class_weights.h"
#include "app/oversample.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;

// Marks an example that a tolerant map gave up on (under skip); filtered out.
constexpr const char* kBadFeature = "bad_example";

data::OnBadExample policy_of(const RunConfig& c) {
  return data::parse_on_bad_example(c.data.on_bad_example, "data.on_bad_example");
}

// Messages of the skipped examples go to summary.json and one log line of
// ours; the sources' own epoch-end lines would repeat them.
data::LogFn no_log() {
  return [](const std::string&) {};
}

std::vector<std::string> glob_files(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) files.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  require(!files.empty(), "data.files: no file matches '" + pattern + "'; check data.dir and the glob");
  std::sort(files.begin(), files.end());
  return files;
}

// data.files' matches, each held to the rule for files a data set names
// (path_in_data_folder): a relative glob's match that is a link leading out
// of data.dir is refused as a data.train_csv would be (it was read). An
// absolute data.files is the user's own choice.
std::vector<std::string> data_files(const RunConfig& c) {
  std::vector<std::string> files = glob_files(data_path(c, c.data.files, "data.files"));
  if (fs::path(c.data.files).is_absolute()) return files;
  for (const auto& file : files)
    path_in_data_folder(c.data_dir, fs::path(file).lexically_relative(c.data_dir).string(),
                        "data.files (" + shown(c.data.files) + ") matches");
  return files;
}

// A label of one class: i32 [] as is; f32 [classes] with exactly one 1 becomes
// its index (the workflow trains one class per image).
data::MapFn single_label() {
  return [](data::Example e, Rng&) {
    const Tensor& label = e.tensor("label");
    if (label.dtype() == DType::i32) return e;
    require(label.dtype() == DType::f32 && label.shape().size() == 1,
            "label: expected a class index or one 0/1 value per class");
    const auto v = label.data<float>();
    int set = 0;
    int32_t index = -1;
    for (std::size_t k = 0; k < v.size(); ++k)
      if (v[k] != 0.0f) ++set, index = static_cast<int32_t>(k);
    require(set == 1 && v[index] == 1.0f, std::to_string(set) +
                                              " classes set; the image workflow trains one class per image (fix the "
                                              "row or set on_bad_example: skip)");
    Tensor t(DType::i32, {});
    t.data<int32_t>()[0] = index;
    e.set("label", std::move(t));
    return e;
  };
}

// Under skip, a map that throws UserError records the message and hands on an
// example marked bad (filtered out next); under fail the error goes on.
data::MapFn tolerant(data::MapFn fn, data::OnBadExample policy, std::shared_ptr<data::SkippedExamples> skipped) {
  return [fn = std::move(fn), policy, skipped = std::move(skipped)](data::Example e, Rng& rng) {
    const std::string file = e.has("file") ? e.text("file") : e.has("id") ? e.text("id") : std::string();
    try {
      return fn(std::move(e), rng);
    } catch (const UserError& err) {
      if (policy == data::OnBadExample::fail) throw;
      std::string what = err.what();
      if (!file.empty() && what.find(file) == std::string::npos) what = file + ": " + what;
      skipped->add(0, what);
      data::Example bad;
      bad.set_text(kBadFeature, "1");
      return bad;
    }
  };
}

image::DecodeMapOptions decode_options(const RunConfig& c) {
  return {.width = static_cast<int>(c.data.width), .height = static_cast<int>(c.data.height),
          .channels = static_cast<int>(c.data.channels),
          .method = c.data.resize == "bilinear" ? image::ResizeMethod::bilinear : image::ResizeMethod::area,
          .fit = c.data.fit == "cover" ? image::Fit::cover : image::Fit::stretch,
          .max_bytes = static_cast<uint64_t>(c.data.max_image_bytes)};
}

data::Dataset decoded(const data::Dataset& source, const RunConfig& c, bool labeled,
                      const std::shared_ptr<data::SkippedExamples>& skipped) {
  data::MapFn decode_fn = image::decode_map("image_bytes", "image", decode_options(c));
  data::MapFn prepare = labeled ? data::MapFn([label = single_label(), decode_fn](data::Example e, Rng& rng) {
    return decode_fn(label(std::move(e), rng), rng);
  })
                                : decode_fn;
  return source.map(tolerant(std::move(prepare), policy_of(c), skipped), {.parallelism = data::kAutotune})
      .filter([](const data::Example& e) { return !e.has(kBadFeature); });
}

std::vector<float> per_channel(const std::vector<double>& v, int64_t channels) {
  std::vector<float> out;
  for (int64_t k = 0; k < channels; ++k) out.push_back(static_cast<float>(v.size() == 1 ? v[0] : v[k]));
  return out;
}

data::MapFn to_float(const RunConfig& c) {
  return image::to_float_chw(per_channel(c.data.mean, c.data.channels), per_channel(c.data.std, c.data.channels));
}

// Every example of one epoch of `images` (f32 [C, H, W], i32 label) stacked.
data::LabeledImages materialize(const data::Dataset& images, const Shape& shape) {
  std::vector<data::Example> all;
  for (data::Example& e : images.epoch(0)) all.push_back(std::move(e));
  const auto n = static_cast<int64_t>(all.size());
  data::LabeledImages out{.images = Tensor(DType::f32, {n, shape[0], shape[1], shape[2]}),
                          .labels = Tensor(DType::i32, {n})};
  const int64_t per = shape[0] * shape[1] * shape[2];
  for (int64_t i = 0; i < n; ++i) {
    const auto px = all[i].tensor("image").data<float>();
    std::copy(px.begin(), px.end(), out.images.data<float>().begin() + i * per);
    out.labels.data<int32_t>()[i] = all[i].tensor("label").data<int32_t>()[0];
  }
  return out;
}

struct Split {
  data::Dataset train, validation;
};

// A CSV's 0/1 class columns against data.classes, which fixes the label
// order: the first column or class on one side only is named, with what to do.
void require_columns_are_classes(const std::vector<std::string>& columns, const std::vector<std::string>& classes,
                                 const std::string& csv) {
  if (columns == classes) return;
  const auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (const std::string& column : columns)
    require(has(classes, column), csv + ": class column '" + shown(column) + "' is not in data.classes (" +
                                      shown_list(classes) + "); add it to data.classes or remove the column from the CSV");
  for (const std::string& name : classes)
    require(has(columns, name), csv + ": data.classes names '" + shown(name) + "' but the CSV has no such column; "
                                      "add the column or drop the class from data.classes");
  throw UserError(csv + ": its class columns (" + shown_list(columns) + ") are in another order than data.classes (" +
                  shown_list(classes) + "), which fixes the labels; list data.classes in the CSV's order");
}

// A fraction as a message shows it: 0.2, not 0.200000.
std::string fraction_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

// Images per class in a manifest (a multi-label row counts for each of its classes).
std::vector<int64_t> images_per_class(const records::Manifest& m) {
  std::vector<int64_t> n(m.classes.size(), 0);
  for (const records::ManifestEntry& e : m.entries) {
    if (m.label_kind == records::LabelKind::index && e.label >= 0 && static_cast<std::size_t>(e.label) < n.size())
      ++n[static_cast<std::size_t>(e.label)];
    for (std::size_t k = 0; k < e.one_hot.size() && k < n.size(); ++k) n[k] += e.one_hot[k] == 1.0f;
  }
  return n;
}

// The split leaves every class something to train on, and validation
// something to measure: said with the class and its count, which the
// advice needs ("leaves no validation images" left the user to guess).
void require_split_serves_every_class(const records::ManifestSplit& s, double fraction) {
  const std::vector<int64_t> train = images_per_class(s.train), validation = images_per_class(s.validation);
  const std::string split = "data.validation_split " + fraction_text(fraction);
  std::size_t largest = 0;
  for (std::size_t k = 0; k < train.size(); ++k) {
    const int64_t total = train[k] + validation[k];
    require(total == 0 || train[k] > 0, split + " puts all " + std::to_string(total) + " image(s) of class '" +
                                            shown(s.train.classes[k]) + "' in validation, leaving none to train on; "
                                            "add images to it or lower data.validation_split");
    if (total > train[largest] + validation[largest]) largest = k;
  }
  if (!s.validation.entries.empty() || train.empty()) return;
  const int64_t most = train[largest] + validation[largest];
  throw UserError(split + " leaves no validation images: even the largest class, '" + shown(s.train.classes[largest]) +
                     "', has " + std::to_string(most) + " image(s), and " + fraction_text(fraction) + " of " +
                     std::to_string(most) + " rounds to 0; add images or raise data.validation_split to at least " +
                     fraction_text(std::ceil(500.0 / static_cast<double>(most)) / 1000));
}

// csv and folders: a manifest split by its rows, before any image is read.
Split manifest_split(const RunConfig& c, ImageData& out, const std::shared_ptr<data::SkippedExamples>& skipped) {
  const data::OnBadExample policy = policy_of(c);
  records::Manifest m;
  if (c.data.kind == "csv") {
    m = records::read_csv_manifest(data_path(c, c.data.train_csv, "data.train_csv"),
                                   {.id_column = c.data.id_column, .label_column = c.data.label_column,
                                    .classes = c.data.label_column.empty() ? std::vector<std::string>{} : c.data.classes,
                                    .image_dir = c.data.images, .extension = c.data.extension,
                                    .max_image_bytes = static_cast<uint64_t>(c.data.max_image_bytes),
                                    .on_bad_example = policy, .log = no_log(), .one_class_per_row = true});
    require(m.label_kind != records::LabelKind::none,
            data_path(c, c.data.train_csv, "data.train_csv") + ": has no class columns; give one 0/1 column per class or data.label_column");
  } else {
    m = records::read_folder_manifest(c.data_dir, {.classes = c.data.classes, .on_bad_example = policy, .log = no_log()});
  }
  if (!c.data.classes.empty() && c.data.label_column.empty() && c.data.kind == "csv")
    require_columns_are_classes(m.classes, c.data.classes, data_path(c, c.data.train_csv, "data.train_csv"));
  out.classes = m.classes;
  out.one_hot = m.label_kind == records::LabelKind::one_hot;
  out.skipped.insert(out.skipped.end(), m.skipped.begin(), m.skipped.end());
  records::ManifestSplit s = records::stratified_split(m, c.data.validation_split, c.seed);
  require_split_serves_every_class(s, c.data.validation_split);
  if (c.data.oversample) s.train = oversampled(std::move(s.train));
  const records::ManifestDatasetOptions o{.max_image_bytes = static_cast<uint64_t>(c.data.max_image_bytes),
                                          .on_bad_example = policy, .skipped = skipped, .log = no_log()};
  return {records::manifest_dataset(s.train, o), records::manifest_dataset(s.validation, o)};
}

// tfrecord: labels learnt from one pass, then split by them.
Split tfrecord_split(const RunConfig& c, ImageData& out, const std::shared_ptr<data::SkippedExamples>& skipped) {
  const records::TfRecordOptions o{.on_bad_example = policy_of(c), .skipped = skipped, .log = no_log()};
  const data::Dataset labels = records::tfrecord_dataset(data_files(c), o)
                                   .map(tolerant(single_label(), policy_of(c), skipped))
                                   .filter([](const data::Example& e) { return !e.has(kBadFeature); });
  // In 64 bits (label 2^31 - 1 + 1 overflowed an int), and the labels used
  // counted: one stray huge label made that many classes, a head of millions.
  std::set<int64_t> used;
  for (data::Example& e : labels.epoch(0)) used.insert(e.tensor("label").data<int32_t>()[0]);
  const int64_t classes = used.empty() ? 0 : *used.rbegin() + 1;
  const auto unused = classes - static_cast<int64_t>(used.size());
  require(!c.data.classes.empty() || unused <= static_cast<int64_t>(used.size()),
          data_path(c, c.data.files, "data.files") + ": the records' largest label is " + std::to_string(classes - 1) + ", so there " +
              "would be " + std::to_string(classes) + " classes, but only " + std::to_string(used.size()) +
              " labels are used; labels are class indices from 0: fix the stray label, or name the classes in "
              "data.classes");
  // Whether the records carry one-hot rows (image/class/one_hot) or indices: the first record says.
  bool one_hot = false;
  for (data::Example& e : records::tfrecord_dataset(data_files(c), o).take(1).epoch(0))
    one_hot = e.tensor("label").dtype() == DType::f32;
  if (c.data.classes.empty()) {
    for (int64_t k = 0; k < classes; ++k) out.classes.push_back(std::to_string(k));
  } else {
    require(static_cast<int64_t>(c.data.classes.size()) >= classes,
            "data.classes names " + std::to_string(c.data.classes.size()) + " classes but the records use label " +
                std::to_string(classes - 1) + " (labels are class indices from 0); add the missing classes to "
                "data.classes or fix the records");
    out.classes = c.data.classes;
  }
  out.one_hot = one_hot;
  const data::TrainValidation s = data::stratified_split(labels, c.data.validation_split, c.seed);
  return {s.train, s.validation};
}

std::vector<std::string> messages(const data::SkippedExamples& s) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& e : s.entries())
    if (seen.insert(e.what).second) out.push_back(e.what);
  return out;
}

}  // namespace

namespace {

records::Manifest test_manifest(const RunConfig& c, const std::string& test_csv) {
  // Every row stays (a submission needs them all), so files are not checked
  // here: a missing one fails or is skipped where it is decoded.
  return records::read_csv_manifest(test_csv, {.id_column = c.data.id_column, .classes = {}, .image_dir = c.data.images,
                                               .extension = c.data.extension, .check_files = false,
                                               .on_bad_example = policy_of(c), .log = no_log()});
}

}  // namespace

void check_test_images(const RunConfig& c) {
  if (c.data.kind != "csv" || c.data.test_csv.empty() || policy_of(c) != data::OnBadExample::fail) return;
  const records::Manifest m = test_manifest(c, data_path(c, c.data.test_csv, "data.test_csv"));
  const data::Dataset decoded = records::manifest_dataset(m, {.read_bytes = false, .log = no_log()})
                                    .map(image::decode_map("file", "image", decode_options(c)),
                                         {.parallelism = data::kAutotune});
  for (auto it = decoded.iterate(0); it->next();) {
  }
}

std::string data_path(const RunConfig& c, const std::string& path, const char* key) {
  return path_in_data_folder(c.data_dir, path, key);  // an absolute `path` replaces the folder
}

ImageData load_image_data(const RunConfig& c, bool with_training) {
  require(c.data.reads_images(), "load_image_data: data.kind is idx");
  require(c.strategy == "single", "data.kind " + c.data.kind +
                                      ": image data trains on one replica for now; set distributed.strategy: single");
  ImageData out;
  auto skipped = std::make_shared<data::SkippedExamples>();
  const Split split = c.data.kind == "tfrecord" ? tfrecord_split(c, out, skipped) : manifest_split(c, out, skipped);
  const auto classes = static_cast<int64_t>(out.classes.size());
  require(classes >= 2, "data: found " + std::to_string(classes) + " class(es); classification needs at least 2");
  const Shape shape = {c.data.channels, c.data.height, c.data.width};
  out.validation = materialize(decoded(split.validation, c, true, skipped).map(to_float(c)), shape);
  require(out.validation.size() > 0, "data.validation_split " + std::to_string(c.data.validation_split) +
                                         " leaves no validation images; raise it or add images");
  if (with_training) {
    data::Dataset train = decoded(split.train, c, true, skipped);
    if (c.data.cache == "memory") train = train.cache();
    // One pass now: every bad image fails (or is counted) before training
    // starts, the cache is filled, and the epoch length is known.
    int64_t n = 0;
    std::vector<int64_t> counts(static_cast<std::size_t>(classes), 0);
    for (auto it = train.iterate(0); auto e = it->next();) {
      ++n;
      const int32_t label = e->tensor("label").data<int32_t>()[0];
      if (label >= 0 && label < classes) ++counts[static_cast<std::size_t>(label)];
    }
    out.train_examples = n;
    out.class_weights = class_weights_for(c.data, out.classes, counts);
    require(n >= c.batch_size, "the training split has " + std::to_string(n) + " images, fewer than a batch of " +
                                   std::to_string(c.batch_size) + "; use a smaller training.batch_size");
    const image::AugmentOptions& a = c.data.augment;
    const bool augmenting = a.horizontal_flip || a.vertical_flip || a.crop_area < 1 || a.rotation > 0 || a.zoom > 0 ||
                            a.translate > 0 || a.brightness > 0 || a.contrast > 0 || a.saturation > 0 || a.hue > 0 ||
                            a.cutout > 0;
    if (augmenting) train = train.map(image::augment(a), {.parallelism = data::kAutotune, .seed = c.seed + 101});
    train = train.map(to_float(c), {.parallelism = data::kAutotune});
    if (!out.class_weights.empty()) train = train.map(weighted_one_hot(out.class_weights));
    else if (out.one_hot) train = train.map(data::one_hot("label", classes));
    train = train.shuffle(c.data.shuffle_buffer > 0 ? c.data.shuffle_buffer : n, c.seed)
                .batch(c.batch_size, /*drop_remainder=*/true)
                .prefetch(2);
    out.training = TrainingData::from_batches(train, n / c.batch_size, in_order(out.validation, c.batch_size));
  }
  const std::vector<std::string> bad = messages(*skipped);
  out.skipped.insert(out.skipped.end(), bad.begin(), bad.end());
  return out;
}

ImagePredictions predict_manifest(Executable& exe, const RunConfig& c, const records::Manifest& m) {
  const data::OnBadExample policy = policy_of(c);
  auto bad_ids = std::make_shared<std::set<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  auto lost = std::make_shared<data::SkippedExamples>();
  const image::DecodeMapOptions decode = decode_options(c);
  const data::MapFn decode_fn = image::decode_map("file", "image", decode);
  const data::MapFn read = [=](data::Example e, Rng& rng) {
    const std::string id = e.text("id"), file = e.text("file");
    try {
      e = decode_fn(std::move(e), rng);
    } catch (const UserError& err) {
      if (policy == data::OnBadExample::fail) throw;
      lost->add(0, err.what());
      {
        std::lock_guard lock(*mu);
        bad_ids->insert(id);
      }
      e = data::Example();  // the same features as the good ones, so it batches with them
      e.set_text("id", id);
      e.set_text("file", file);
      e.set("image", image::image_tensor(decode.width, decode.height, decode.channels));
    }
    e.set("label", Tensor(DType::i32, {}));  // unknown; the batch machinery wants one
    return e;
  };
  const data::Dataset batches = records::manifest_dataset(m, {.read_bytes = false, .log = no_log()})
                                    .map(read, {.parallelism = data::kAutotune})
                                    .map(to_float(c), {.parallelism = data::kAutotune})
                                    .batch(exe.compiled_for().batch_size)
                                    .prefetch(2);
  const int64_t classes = exe.compiled_for().output_size;
  require(classes == static_cast<int64_t>(c.data.classes.size()),
          "the model has " + std::to_string(classes) + " outputs but data.classes names " +
              std::to_string(c.data.classes.size()));
  ImagePredictions out;
  out.classes = classes;
  const Loss loss = loss_kind(c);
  std::vector<float> p(static_cast<std::size_t>(classes));
  for_each_output(exe, batches, [&](int64_t i, const float* row) {
    const std::string& id = m.entries[static_cast<std::size_t>(i)].id;
    bool bad;
    {
      std::lock_guard lock(*mu);  // decoding threads may be adding later rows' ids
      bad = bad_ids->count(id) > 0;
    }
    if (bad) std::fill(p.begin(), p.end(), 1.0f / static_cast<float>(classes));
    else output_probabilities(loss, row, classes, p.data());
    out.ids.push_back(id);
    out.probabilities.insert(out.probabilities.end(), p.begin(), p.end());
  });
  for (const auto& s : m.skipped) out.skipped.push_back(s);
  for (const auto& s : messages(*lost)) out.skipped.push_back(s + " (its row has equal probabilities)");
  return out;
}

std::string predictions_csv(const ImagePredictions& p, const std::string& first_column,
                            const std::vector<std::string>& classes) {
  std::string csv = records::csv_field(first_column);
  for (const auto& name : classes) csv += "," + records::csv_field(name);
  csv += "\n";
  char cell[32];
  for (std::size_t r = 0; r < p.ids.size(); ++r) {
    csv += records::csv_field(p.ids[r]);
    for (int64_t k = 0; k < p.classes; ++k) {
      std::snprintf(cell, sizeof cell, ",%.6f", p.probabilities[r * static_cast<std::size_t>(p.classes) + k]);
      csv += cell;
    }
    csv += "\n";
  }
  return csv;
}

int64_t write_submission(Executable& exe, const RunConfig& c, const std::string& test_csv,
                         const std::string& output_csv, std::vector<std::string>* skipped) {
  require(c.data.kind == "csv", "a submission needs a test CSV of image ids beside the images; data.kind " +
                                    c.data.kind + " has none (use kind csv)");
  const ImagePredictions p = predict_manifest(exe, c, test_manifest(c, test_csv));
  io::write_file_atomic(output_csv, predictions_csv(p, c.data.id_column, c.data.classes));
  if (skipped) skipped->insert(skipped->end(), p.skipped.begin(), p.skipped.end());
  return static_cast<int64_t>(p.ids.size());
}

}  // namespace convoy::train
