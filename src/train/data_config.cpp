#include "train/data_config.h"

#include <cmath>
#include <string>
#include <vector>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/data/bad_examples.h"
#include "train/float_text.h"

namespace convoy::train {
namespace {

using nlohmann::json;

const char* fill_mode_name(image::FillMode m) {
  switch (m) {
    case image::FillMode::constant: return "constant";
    case image::FillMode::reflect: return "reflect";
    case image::FillMode::wrap: return "wrap";
    case image::FillMode::nearest: return "nearest";
  }
  return "reflect";
}

image::FillMode parse_fill_mode(const std::string& s, const std::string& where) {
  for (auto m : {image::FillMode::constant, image::FillMode::reflect, image::FillMode::wrap, image::FillMode::nearest})
    if (s == fill_mode_name(m)) return m;
  throw UserError(where + ": 'data.augment.fill_mode' must be constant, reflect, wrap or nearest, got '" + shown(s) + "'");
}

// A list value: strings or numbers, each checked.
template <class T> void get_list(Section& s, const char* key, std::vector<T>& out) {
  const json* v = s.raw(key);
  if (!v) return;
  const bool ok = v->is_array() && std::all_of(v->begin(), v->end(), [](const json& x) {
                    if constexpr (std::is_same_v<T, std::string>) return x.is_string();
                    else return x.is_number();
                  });
  require(ok, s.where() + ": '" + s.dotted(key) + "' must be a list of " +
                  (std::is_same_v<T, std::string> ? "strings" : "numbers") + ", got " +
                  shown_json(*v));
  out = v->get<std::vector<T>>();
}

template <class T> void get_float(Section& s, const char* key, T& out) {
  double v = out;
  s.get(key, v);
  out = static_cast<T>(v);
}

// data.class_weight: balanced, or a mapping of class names to weights.
void read_class_weight(Section& s, DataConfig& d) {
  const json* v = s.raw("class_weight");
  if (!v || v->is_null()) return;
  if (v->is_string()) {
    require(*v == "balanced", s.where() + ": 'data.class_weight' must be balanced or a mapping of class names to "
                                          "weights, got " + shown_json(*v));
    d.class_weight = "balanced";
    return;
  }
  const bool ok = v->is_object() && std::all_of(v->begin(), v->end(), [](const json& w) { return w.is_number(); });
  require(ok, s.where() + ": 'data.class_weight' must be balanced or a mapping of class names to weights "
                          "({rare: 3, common: 1}), got " + shown_json(*v));
  d.class_weight = "map";
  for (auto it = v->begin(); it != v->end(); ++it) d.class_weights[it.key()] = it->get<double>();
}

}  // namespace

void read_data_section(Section& s, RunConfig& c) {
  DataConfig& d = c.data;
  s.get("dir", c.data_dir);
  s.get("kind", d.kind);
  s.get("train_csv", d.train_csv);
  s.get("test_csv", d.test_csv);
  s.get("images", d.images);
  s.get("id_column", d.id_column);
  s.get("label_column", d.label_column);
  s.get("extension", d.extension);
  s.get("files", d.files);
  get_list(s, "classes", d.classes);
  s.get("width", d.width);
  s.get("height", d.height);
  s.get("channels", d.channels);
  s.get("resize", d.resize);
  s.get("fit", d.fit);
  s.get("validation_split", d.validation_split);
  s.get("cache", d.cache);
  s.get("shuffle_buffer", d.shuffle_buffer);
  s.get("oversample", d.oversample);
  get_list(s, "mean", d.mean);
  get_list(s, "std", d.std);
  read_class_weight(s, d);
  s.get("on_bad_example", d.on_bad_example);
  s.get("max_image_bytes", d.max_image_bytes);
  Section a = s.sub("augment");
  image::AugmentOptions& g = d.augment;
  a.get("horizontal_flip", g.horizontal_flip);
  a.get("vertical_flip", g.vertical_flip);
  get_float(a, "crop_area", g.crop_area);
  get_float(a, "rotation", g.rotation);
  get_float(a, "zoom", g.zoom);
  get_float(a, "translate", g.translate);
  std::string fill = fill_mode_name(g.fill_mode);
  a.get("fill_mode", fill);
  g.fill_mode = parse_fill_mode(fill, s.where());
  int64_t fill_value = g.fill_value;
  a.get("fill_value", fill_value);
  require(fill_value >= 0 && fill_value <= 255, s.where() + ": 'data.augment.fill_value' must be in [0, 255]");
  g.fill_value = static_cast<uint8_t>(fill_value);
  get_float(a, "brightness", g.brightness);
  get_float(a, "contrast", g.contrast);
  get_float(a, "saturation", g.saturation);
  get_float(a, "hue", g.hue);
  int64_t cutout = g.cutout;
  a.get("cutout", cutout);
  g.cutout = static_cast<int>(cutout);
  get_float(a, "cutout_size", g.cutout_size);
  a.finish();
}

json data_section_json(const RunConfig& c) {
  const DataConfig& d = c.data;
  if (!d.reads_images()) return {{"dir", c.data_dir}};
  const image::AugmentOptions& g = d.augment;
  return {{"dir", c.data_dir}, {"kind", d.kind}, {"train_csv", d.train_csv}, {"test_csv", d.test_csv},
          {"images", d.images}, {"id_column", d.id_column}, {"label_column", d.label_column},
          {"extension", d.extension}, {"files", d.files}, {"classes", d.classes}, {"width", d.width},
          {"height", d.height}, {"channels", d.channels}, {"resize", d.resize}, {"fit", d.fit},
          {"validation_split", d.validation_split}, {"cache", d.cache}, {"shuffle_buffer", d.shuffle_buffer}, {"oversample", d.oversample},
          {"class_weight", d.class_weight == "map" ? json(d.class_weights) : d.class_weight.empty() ? json(nullptr) : json(d.class_weight)},
          {"mean", d.mean}, {"std", d.std}, {"on_bad_example", d.on_bad_example},
          {"max_image_bytes", d.max_image_bytes},
          {"augment",
           {{"horizontal_flip", g.horizontal_flip}, {"vertical_flip", g.vertical_flip}, {"crop_area", as_written(g.crop_area)},
            {"rotation", as_written(g.rotation)}, {"zoom", as_written(g.zoom)}, {"translate", as_written(g.translate)},
            {"fill_mode", fill_mode_name(g.fill_mode)}, {"fill_value", g.fill_value},
            {"brightness", as_written(g.brightness)}, {"contrast", as_written(g.contrast)},
            {"saturation", as_written(g.saturation)}, {"hue", as_written(g.hue)},
            {"cutout", g.cutout}, {"cutout_size", as_written(g.cutout_size)}}}};
}

void validate_data(const DataConfig& d) {
  require(d.kind == "idx" || d.kind == "csv" || d.kind == "folders" || d.kind == "tfrecord",
          "data.kind: '" + d.kind + "' is not idx, csv, folders or tfrecord");
  for (const auto& [name, w] : d.class_weights)
    require(w >= 0 && std::isfinite(w), "data.class_weight: the weight of '" + shown(name) + "' must be 0 or more");
  if (!d.reads_images()) return;
  require(d.width >= 8 && d.height >= 8 && d.width <= 4096 && d.height <= 4096,
          "data.width and data.height must be in [8, 4096]");
  require(d.channels == 1 || d.channels == 3, "data.channels must be 1 (gray) or 3 (RGB)");
  require(d.resize == "area" || d.resize == "bilinear", "data.resize: '" + d.resize + "' is not area or bilinear");
  require(d.fit == "stretch" || d.fit == "cover", "data.fit: '" + d.fit + "' is not stretch or cover");
  require(d.validation_split > 0 && d.validation_split < 1, "data.validation_split must be in (0, 1)");
  require(d.cache == "memory" || d.cache == "none", "data.cache: '" + d.cache + "' is not memory or none");
  require(d.shuffle_buffer >= 0, "data.shuffle_buffer must be 0 (the whole split) or positive");
  require(d.max_image_bytes >= 1, "data.max_image_bytes must be positive");
  const auto per_channel = [&](const std::vector<double>& v, const char* key) {
    require(v.size() == 1 || static_cast<int64_t>(v.size()) == d.channels,
            std::string("data.") + key + " needs one value, or one per channel (" + std::to_string(d.channels) + ")");
  };
  per_channel(d.mean, "mean");
  per_channel(d.std, "std");
  for (double s : d.std) require(s > 0, "data.std values must be positive");
  require(!d.oversample || d.kind != "tfrecord",
          "data.oversample: repeats rows of a CSV or class-folder manifest; TFRecord files have none (use kind csv or "
          "folders)");
  require(d.kind != "tfrecord" || !d.files.empty(), "data.files: kind tfrecord needs a file glob, e.g. shards/*.tfrecord");
  data::parse_on_bad_example(d.on_bad_example, "data.on_bad_example");
  try {
    image::validate(d.augment);
  } catch (const UserError& e) {
    throw UserError(std::string("data.augment: ") + e.what());
  }
}

}  // namespace convoy::train
