// data.oversample (oversample.h).
#include "app/oversample.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace convoy::train {

records::Manifest oversampled(records::Manifest m) {
  std::map<std::string, std::vector<std::size_t>> by_class;
  for (std::size_t i = 0; i < m.entries.size(); ++i) {
    const records::ManifestEntry& e = m.entries[i];
    std::string key = std::to_string(e.label);
    for (float v : e.one_hot) key += v != 0 ? '1' : '0';
    by_class[key].push_back(i);
  }
  std::size_t largest = 0;
  for (const auto& [key, rows] : by_class) largest = std::max(largest, rows.size());
  for (const auto& [key, rows] : by_class)
    for (std::size_t n = rows.size(), k = 0; n < largest; ++n, ++k) m.entries.push_back(m.entries[rows[k % rows.size()]]);
  return m;
}

}  // namespace convoy::train
