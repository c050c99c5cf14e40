#pragma once
// A small RFC 4180 CSV reader: comma-separated fields, double-quoted fields
// that may hold commas, quotes (doubled) and line breaks; CRLF, LF or CR line
// ends; a UTF-8 byte-order mark at the start is dropped; blank lines are
// skipped. Malformed quoting is a UserError naming the file and line.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace convoy::records {

struct CsvRecord {
  int64_t line;  // 1-based line where the record starts, for error messages
  std::vector<std::string> fields;
};

// Parses `text`; `name` (a path) is used in errors.
std::vector<CsvRecord> parse_csv(std::string_view text, const std::string& name);

// A CSV file whose first record is the header. Rows are not checked against
// the header's width here: the caller decides whether a bad row fails or is
// skipped.
struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<CsvRecord> rows;
  // Index of a header column, or -1.
  int column(std::string_view name) const;
  // Index of a header column; a UserError naming the file and the columns it has.
  int require_column(std::string_view name, std::string_view purpose) const;
};

// Reads a CSV file with a header. UserError for a missing or empty file, a
// header with a duplicate column name, or malformed quoting.
CsvTable read_csv(const std::string& path);

// `value` as one field of a CSV this reader (and Python's csv, Excel) reads
// back as `value`: double-quoted, inner quotes doubled, when it holds a comma,
// a quote or a line break; as it is otherwise. Every CSV convoy writes puts
// its names and ids through it (a file name "a,b.jpg" split a row in two).
std::string csv_field(std::string_view value);

}  // namespace convoy::records
