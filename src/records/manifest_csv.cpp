// read_csv_manifest: a CSV of image ids and labels (one 0/1 column per class,
// or one column of class names) plus an image folder.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "convoy/core/error.h"
#include "convoy/core/path_kind.h"
#include "convoy/core/untrusted.h"
#include "convoy/records/csv.h"
#include "convoy/records/manifest.h"
#include "records/bad_entries.h"

namespace convoy::records {
namespace {

namespace fs = std::filesystem;

// "0" or "1" (also "0.0" / "1.0" as pandas writes floats); nullopt otherwise.
std::optional<float> zero_or_one(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || (v != 0.0 && v != 1.0)) return std::nullopt;
  return static_cast<float>(v);
}

std::string line_of(const CsvRecord& r) { return "line " + std::to_string(r.line); }

// The class columns (one-hot) or class names (label column).
std::vector<std::string> classes_of(const CsvTable& table, const CsvManifestOptions& o, int id_col, int label_col) {
  if (!o.classes.empty()) {
    std::set<std::string> seen;
    for (const std::string& c : o.classes)
      require(seen.insert(c).second, table.path + ": class '" + c + "' is listed twice in the options' classes");
    if (label_col < 0)
      for (const std::string& c : o.classes) table.require_column(c, "a class column named in the options");
    return o.classes;
  }
  if (label_col >= 0) {
    // Sorted, as image_dataset_from_directory sorts folders. A value that is
    // no class name ('.', only quotes, control bytes, not UTF-8) names no
    // class: its row is a bad row below, like any other.
    std::set<std::string> names;
    for (const CsvRecord& r : table.rows)
      if (r.fields.size() == table.header.size() && !class_name_fault(r.fields[label_col]))
        names.insert(r.fields[label_col]);
    return {names.begin(), names.end()};
  }
  std::vector<std::string> columns;
  for (int i = 0; i < static_cast<int>(table.header.size()); ++i)
    if (i != id_col) columns.push_back(table.header[i]);
  return columns;
}

}  // namespace

std::string csv_image_folder(const std::string& csv_path, const std::string& image_dir) {
  return (fs::path(csv_path).parent_path() / image_dir).string();
}

Manifest read_csv_manifest(const std::string& csv_path, const CsvManifestOptions& o) {
  const CsvTable table = read_csv(csv_path);
  require(!table.rows.empty(), csv_path + ": the CSV has a header but no rows; list one image per row");
  const int id_col = table.require_column(o.id_column, "the image id");
  const int label_col = o.label_column.empty() ? -1 : table.require_column(o.label_column, "the class label");
  Manifest m;
  m.classes = classes_of(table, o, id_col, label_col);
  for (const std::string& name : m.classes)
    require_class_name(name,
                       !o.classes.empty() ? csv_path + " (the classes given: data.classes or shards --classes)"
                       : label_col >= 0   ? csv_path + ", column '" + shown(o.label_column) + "'"
                                          : csv_path + ", its header",
                       o.classes.empty() ? "rename it in the CSV" : "fix the list of classes");
  m.label_kind = label_col >= 0 ? LabelKind::index : m.classes.empty() ? LabelKind::none : LabelKind::one_hot;
  std::vector<int> class_cols;
  if (m.label_kind == LabelKind::one_hot)
    for (const std::string& c : m.classes) class_cols.push_back(table.column(c));
  std::map<std::string, int32_t> class_index;
  for (std::size_t i = 0; i < m.classes.size(); ++i) class_index[m.classes[i]] = static_cast<int32_t>(i);

  const fs::path image_dir = csv_image_folder(csv_path, o.image_dir);
  require_folder(image_dir.string(), "the image folder of " + csv_path + ", ",
                 "put the images in a folder beside the CSV and name it (data.images; shards --images)");
  const PathRoot root(image_dir);
  BadEntries bad(csv_path, "row", o.on_bad_example);
  std::map<std::string, int64_t> first_line_of_id;
  for (const CsvRecord& r : table.rows) {
    if (r.fields.size() != table.header.size()) {
      bad.add(line_of(r), std::to_string(r.fields.size()) + " fields but the header has " +
                          std::to_string(table.header.size()) + " columns",
              "fix the row (quote fields that contain commas)");
      continue;
    }
    ManifestEntry e;
    e.id = r.fields[id_col];
    e.where = csv_path + " line " + std::to_string(r.line);
    if (e.id.empty()) {
      bad.add(line_of(r), "empty " + o.id_column, "give every row an id");
      continue;
    }
    if (auto [it, fresh] = first_line_of_id.emplace(e.id, r.line); !fresh) {
      bad.add(line_of(r), o.id_column + " '" + shown(e.id) + "' appears again (first on line " + std::to_string(it->second) + ")",
              "list each image once");
      continue;
    }
    if (m.label_kind == LabelKind::index) {
      const std::string& name = r.fields[label_col];
      auto it = class_index.find(name);
      if (name.empty()) {
        bad.add(line_of(r), "no class set in column '" + o.label_column + "'", "give every row a class");
        continue;
      }
      if (const char* why = class_name_fault(name)) {
        bad.add(line_of(r), "class name '" + shown(name) + "' in column '" + shown(o.label_column) + "' " + why,
                "give the row a class name");
        continue;
      }
      if (it == class_index.end()) {
        bad.add(line_of(r), "unknown class '" + shown(name) + "' in column '" + o.label_column + "'",
                o.classes.empty() ? "use one of: " + shown_list(m.classes)
                                  : "add it to the classes given (data.classes; shards: --classes) or fix the CSV to "
                                    "use one of: " + shown_list(m.classes));
        continue;
      }
      e.label = it->second;
    } else if (m.label_kind == LabelKind::one_hot) {
      std::string problem;
      for (std::size_t c = 0; c < class_cols.size() && problem.empty(); ++c) {
        const std::string& v = r.fields[class_cols[c]];
        if (auto x = zero_or_one(v))
          e.one_hot.push_back(*x);
        else
          problem = "column '" + shown(m.classes[c]) + "' holds '" + shown(v) + "', not 0 or 1";
      }
      if (!problem.empty()) {
        bad.add(line_of(r), problem, "a class column holds 0 or 1");
        continue;
      }
      if (std::none_of(e.one_hot.begin(), e.one_hot.end(), [](float x) { return x == 1.0f; })) {
        bad.add(line_of(r), "no class set (every one of " + shown_list(m.classes) + " is 0)", "set a 1 in the row's class");
        continue;
      }
      if (o.one_class_per_row) {
        std::vector<std::string> set;
        for (std::size_t c = 0; c < e.one_hot.size(); ++c)
          if (e.one_hot[c] == 1.0f) set.push_back(m.classes[c]);
        if (set.size() > 1) {
          bad.add(line_of(r), std::to_string(set.size()) + " classes set (" + shown_list(set) + ")",
                  "the image workflow trains one class per image: keep one 1 in the row");
          continue;
        }
      }
    }
    if (const auto why = root.outside(e.id + o.extension)) {
      bad.add(line_of(r), o.id_column + " '" + shown(e.id) + "' leads outside the image folder " + image_dir.string() +
                          " (" + *why + ")",
              "ids name files inside the image folder");
      continue;
    }
    e.path = (image_dir / (e.id + o.extension)).string();
    std::error_code ec;
    if (o.check_files && !fs::is_regular_file(e.path, ec)) {
      // Kaggle CSVs often hold whole file names ("a.jpg"), which the extension then doubles.
      const bool named_whole = !o.extension.empty() && fs::is_regular_file(image_dir / e.id, ec);
      bad.add(line_of(r), "image file " + shown(e.path, 2 * kShownChars) + " is missing",
              named_whole ? "the ids are whole file names already: set data.extension to '' (shards: --extension '')"
                          : "add it, or fix image_dir/extension");
      continue;
    }
    if (const uint64_t size = o.check_files ? fs::file_size(e.path, ec) : 0; !ec && size > o.max_image_bytes) {
      bad.add(line_of(r), "image file " + shown(e.path, 2 * kShownChars) + " has " + std::to_string(size) +
                          " bytes, more than the " + std::to_string(o.max_image_bytes) + " an image may have",
              "shrink it or raise data.max_image_bytes");
      continue;
    }
    m.entries.push_back(std::move(e));
  }
  m.skipped = bad.finish(o.log);
  if (m.entries.empty())  // every row skipped: the first one's problem, and what to do about it
    throw UserError(csv_path + ": no usable rows: all " + std::to_string(table.rows.size()) + " were bad, the first " +
                    shown(m.skipped.front().substr(csv_path.size() + 2), 160) + "; " + bad.first_advice());
  return m;
}

}  // namespace convoy::records
