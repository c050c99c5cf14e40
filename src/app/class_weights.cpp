// data.class_weight (class_weights.h).
#include "app/class_weights.h"

#include <cstdio>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::train {

std::vector<double> class_weights_for(const DataConfig& d, const std::vector<std::string>& classes,
                                      const std::vector<int64_t>& counts) {
  if (d.class_weight.empty()) return {};
  std::vector<double> w(classes.size(), 1.0);
  if (d.class_weight == "balanced") {
    int64_t total = 0;
    for (int64_t n : counts) total += n;
    for (std::size_t k = 0; k < classes.size(); ++k)
      w[k] = counts[k] > 0 ? static_cast<double>(total) / (static_cast<double>(classes.size()) * counts[k]) : 1.0;
    return w;
  }
  for (const auto& [name, weight] : d.class_weights) {
    std::size_t k = 0;
    while (k < classes.size() && classes[k] != name) ++k;
    if (k == classes.size()) {
      std::string names;
      for (const auto& c : classes) names += (names.empty() ? "" : ", ") + shown(c);
      throw UserError("data.class_weight: '" + shown(name) + "' is not a class of the data; its classes: " + names);
    }
    w[k] = weight;
  }
  return w;
}

data::MapFn weighted_one_hot(std::vector<double> weights) {
  return [weights = std::move(weights)](data::Example e, Rng&) {
    const int32_t label = e.tensor("label").data<int32_t>()[0];
    require(label >= 0 && static_cast<std::size_t>(label) < weights.size(),
            "class_weight: label " + std::to_string(label) + " is past the classes");
    Tensor row(DType::f32, {static_cast<int64_t>(weights.size())});
    auto v = row.data<float>();
    std::fill(v.begin(), v.end(), 0.0f);
    v[label] = static_cast<float>(weights[label]);
    e.set("label", std::move(row));
    return e;
  };
}

std::string describe_weights(const std::vector<double>& w, const std::vector<std::string>& classes) {
  std::string out;
  char cell[32];
  for (std::size_t k = 0; k < w.size(); ++k) {
    std::snprintf(cell, sizeof cell, " %.3g", w[k]);
    out += (k ? ", " : "") + classes[k] + cell;
  }
  return out;
}

}  // namespace convoy::train
