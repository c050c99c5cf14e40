#include "convoy/records/csv.h"

#include <iterator>
#include <set>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::records {
namespace {

// Walks the text once, keeping the line number for messages.
class CsvParser {
 public:
  CsvParser(std::string_view text, const std::string& name) : text_(text), name_(name) {
    if (text_.starts_with("\xEF\xBB\xBF")) i_ = 3;
  }

  std::vector<CsvRecord> records() {
    std::vector<CsvRecord> out;
    while (i_ < text_.size()) {
      if (at_line_end()) {  // a blank line
        end_line();
        continue;
      }
      CsvRecord r{line_, {}};
      for (;;) {
        r.fields.push_back(field());
        if (r.fields.size() > kMaxCsvFields)
          throw UserError(name_ + ": line " + std::to_string(r.line) + ": more than " + std::to_string(kMaxCsvFields) +
                          " fields in one row; this is not a manifest CSV");
        if (i_ < text_.size() && text_[i_] == ',') {
          ++i_;
          continue;
        }
        if (i_ < text_.size()) end_line();
        break;
      }
      out.push_back(std::move(r));
    }
    return out;
  }

 private:
  bool at_line_end() const { return text_[i_] == '\n' || text_[i_] == '\r'; }

  // Consumes one line end: CRLF, LF or a lone CR.
  void end_line() {
    if (text_[i_] == '\r' && i_ + 1 < text_.size() && text_[i_ + 1] == '\n') ++i_;
    ++i_;
    ++line_;
  }

  std::string field() {
    if (i_ < text_.size() && text_[i_] == '"') return quoted();
    const std::size_t start = i_;
    while (i_ < text_.size() && text_[i_] != ',' && !at_line_end()) ++i_;
    return std::string(text_.substr(start, i_ - start));
  }

  std::string quoted() {
    const int64_t opened = line_;
    std::string out;
    ++i_;
    for (;;) {
      if (i_ >= text_.size())
        throw UserError(name_ + ": line " + std::to_string(opened) +
                        ": a quoted field is never closed; close the quote or double the quotes inside it");
      const char c = text_[i_];
      if (c == '"') {
        if (i_ + 1 < text_.size() && text_[i_ + 1] == '"') {
          out += '"';
          i_ += 2;
          continue;
        }
        ++i_;
        break;
      }
      // Line ends inside quotes are data, but still count as lines.
      if (c == '\n' || (c == '\r' && !(i_ + 1 < text_.size() && text_[i_ + 1] == '\n'))) ++line_;
      out += c;
      ++i_;
    }
    if (i_ < text_.size() && text_[i_] != ',' && !at_line_end())
      throw UserError(name_ + ": line " + std::to_string(line_) + ": unexpected '" + shown(text_.substr(i_, 1)) +
                      "' after a closing quote; quote the whole field and double the quotes inside it");
    return out;
  }

  std::string_view text_;
  const std::string& name_;
  std::size_t i_ = 0;
  int64_t line_ = 1;
};

}  // namespace

std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& name) {
  return CsvParser(text, name).records();
}

int CsvTable::column(std::string_view name) const {
  for (std::size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  return -1;
}

int CsvTable::require_column(std::string_view name, std::string_view purpose) const {
  const int i = column(name);
  if (i >= 0) return i;
  std::string have;
  for (std::size_t i = 0; i < header.size() && have.size() < 4 * kShownChars; ++i)
    have += (i ? ", " : "") + shown(header[i]);
  if (have.size() >= 4 * kShownChars) have += ", ... (" + std::to_string(header.size()) + " in all)";
  throw UserError(path + ": no column '" + shown(name) + "' (" + std::string(purpose) + "); its columns are: " + have);
}

CsvTable read_csv(const std::string& path) {
  CsvTable table{path, {}, {}};
  std::vector<CsvRecord> records = parse_csv(read_file_bounded(path, kMaxCsvBytes, "CSV file"), path);
  require(!records.empty(), path + ": empty CSV file (no header, no rows); write a header line and one row per example");
  table.header = std::move(records.front().fields);
  std::set<std::string> seen;
  for (const std::string& h : table.header)
    require(seen.insert(h).second,
            path + ": the header names column '" + shown(h) + "' twice; give every column its own name");
  table.rows.assign(std::make_move_iterator(records.begin() + 1), std::make_move_iterator(records.end()));
  return table;
}

std::string csv_field(std::string_view value) {
  if (value.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(value);
  std::string out = "\"";
  for (const char c : value) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace convoy::records
