// stratified_split for manifests: split the list of files, not the decoded
// images, so no image is read to learn its label.
#include <cmath>
#include <map>

#include "convoy/core/error.h"
#include "convoy/core/rng.h"
#include "convoy/records/manifest.h"

namespace convoy::records {
namespace {

// The stratum of an entry: its class, or its whole one-hot pattern (so a
// multi-label combination is spread like a class of its own).
std::string stratum(const Manifest& m, const ManifestEntry& e) {
  if (m.label_kind == LabelKind::index) return std::to_string(e.label);
  std::string pattern;
  for (float v : e.one_hot) pattern += v != 0.0f ? '1' : '0';
  return pattern;
}

}  // namespace

ManifestSplit stratified_split(const Manifest& manifest, double validation_fraction, uint64_t seed) {
  require(validation_fraction >= 0 && validation_fraction <= 1,
          "stratified_split: validation_fraction must be in [0, 1], got " + std::to_string(validation_fraction));
  require(manifest.label_kind != LabelKind::none,
          "stratified_split: the manifest has no labels to stratify by; split a labeled CSV or folder");
  std::map<std::string, std::vector<int64_t>> by_stratum;  // ordered: the same draws everywhere
  for (std::size_t i = 0; i < manifest.entries.size(); ++i)
    by_stratum[stratum(manifest, manifest.entries[i])].push_back(static_cast<int64_t>(i));
  std::vector<bool> in_validation(manifest.entries.size(), false);
  Rng rng(seed);
  for (auto& [key, positions] : by_stratum) {
    shuffle(positions, rng);
    const auto take = static_cast<std::size_t>(std::llround(validation_fraction * positions.size()));
    for (std::size_t i = 0; i < take; ++i) in_validation[positions[i]] = true;
  }
  ManifestSplit out;
  for (Manifest* half : {&out.train, &out.validation}) {
    half->classes = manifest.classes;
    half->label_kind = manifest.label_kind;
  }
  out.train.skipped = manifest.skipped;
  for (std::size_t i = 0; i < manifest.entries.size(); ++i)
    (in_validation[i] ? out.validation : out.train).entries.push_back(manifest.entries[i]);
  return out;
}

}  // namespace convoy::records
