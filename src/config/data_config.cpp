#include "config/data_config.h"

#include <cmath>
#include <string>
#include <vector>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"


namespace convoy::train {

void validate_data(const DataConfig& d) {
  for (const auto& [name, w] : d.class_weights)
    require(w >= 0 && std::isfinite(w), "data.class_weight: the weight of '" + shown(name) + "' must be 0 or more");
  if (!d.reads_images()) return;
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
}

}  // namespace convoy::train
