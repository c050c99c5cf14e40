#include "config/yaml_documents.h"

namespace convoy::train {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// The line's text after leading blanks, or empty when it is blank or a comment.
std::string_view meaningful(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && blank(line[i])) ++i;
  line.remove_prefix(i);
  if (line.empty() || line.front() == '#') return {};
  return line;
}

// A document marker line: "---" or "..." then a blank or the line's end.
bool marker(std::string_view line) {
  if (line.size() < 3) return false;
  const std::string_view head = line.substr(0, 3);
  if (head != "---" && head != "...") return false;
  return line.size() == 3 || blank(line[3]);
}

}  // namespace

int yaml_documents_with_content(std::string_view text) {
  int documents = 0;
  bool current_has_content = false;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (marker(line)) {
      if (current_has_content) ++documents;
      current_has_content = false;
      line.remove_prefix(3);  // "--- value": the value belongs to the new document
    } else if (!line.empty() && line.front() == '%') {
      continue;  // a directive (%YAML, %TAG) before a document
    }
    if (!meaningful(line).empty()) current_has_content = true;
  }
  return documents + (current_has_content ? 1 : 0);
}

}  // namespace convoy::train
