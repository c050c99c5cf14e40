// Suggestions for an unknown config key (config_section.h).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "config/config_section.h"

namespace convoy::train {
namespace {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

}  // namespace

std::vector<std::string> close_matches(const std::string& key, const std::set<std::string>& known) {
  const std::string k = lower(key);
  // Keras and PyTorch spellings of the keys people mistype most.
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"learning_rate", "lr"}, {"batchsize", "batch_size"}, {"num_epochs", "epochs"}, {"optim", "name"},
      {"image_size", "width"}, {"img_size", "width"}, {"arch", "name"}};
  std::vector<std::string> out;
  for (const auto& [alias, name] : aliases)
    if (k == alias && known.count(name)) out.push_back(name);
  const std::size_t budget = std::max<std::size_t>(1, k.size() / 3);
  for (const auto& n : known) {
    const bool near = edit_distance(k, lower(n)) <= budget ||
                      (k.size() >= 3 && n.size() >= 3 &&
                       (lower(n).find(k) != std::string::npos || k.find(lower(n)) != std::string::npos));
    if (near && std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  if (out.size() > 3) out.resize(3);
  return out;
}

UserError unknown_key(const std::string& where, const std::string& prefix, const std::string& key,
                      const std::set<std::string>& known) {
  const auto dotted = [&](const std::string& k) { return prefix.empty() ? k : prefix + "." + k; };
  std::string list, close;
  for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
  for (const auto& n : close_matches(key, known)) close += (close.empty() ? "" : " or ") + ("'" + dotted(n) + "'");
  return UserError(where + ": unknown key '" + shown(dotted(key)) + "'" +
                   (close.empty() ? "" : "; did you mean " + close + "?") + " (known here: " + list + ")");
}

}  // namespace convoy::train
