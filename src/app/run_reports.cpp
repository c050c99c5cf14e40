#include "app/run_reports.h"

#include "convoy/data/fashion_mnist.h"
#include "convoy/data/idx.h"

namespace convoy::train {

DataLook look_of(const RunConfig& c) {
  if (!c.data.reads_images()) return {"Fashion-MNIST", data::kFashionMnistClasses, {data::kSeedMean}, {data::kSeedStd}};
  DataLook look{c.data_dir, c.data.classes, {}, {}};
  for (int64_t k = 0; k < c.data.channels; ++k) {
    const auto pick = [&](const std::vector<double>& v) { return static_cast<float>(v.size() == 1 ? v[0] : v[k]); };
    look.mean.push_back(pick(c.data.mean));
    look.std.push_back(pick(c.data.std));
  }
  return look;
}

std::vector<report::NamedHistory> compared_runs(const RunConfig& c, const History& h, const std::optional<History>& scratch) {
  if (!scratch || scratch->epochs.empty() || h.epochs.empty()) return {};
  return {{c.pretrained.empty() ? "this run" : "pretrained", h}, {"from scratch", *scratch}};
}

}  // namespace convoy::train
