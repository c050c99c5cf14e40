// The config keys as help: the README's table, `convoy help config`, and
// each flag's --help line, all from config_schema().
#include <sstream>
#include <string>

#include "convoy/config/config_schema.h"

namespace convoy::train {
namespace {

// A table cell: a '|' would end it.
std::string cell(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

std::string code(const std::string& s) { return s.empty() ? "" : "`" + s + "`"; }

// The help, the details, and whether only image data reads the key.
std::string meaning(const ConfigKey& k) {
  return (k.details.empty() ? k.help : k.help + ". " + k.details) +
         (k.images_only && !k.always_checked ? " (image data)" : "");
}

}  // namespace

std::string config_keys_markdown() {
  std::ostringstream out;
  out << "| key | flag | type | default | allowed | meaning |\n|---|---|---|---|---|---|\n";
  for (const ConfigKey& k : config_schema())
    out << "| " << code(k.name) << " | " << code(k.flag) << " | " << k.type_text() << " | " << cell(k.default_text())
        << " | " << cell(k.allowed.text()) << " | " << cell(meaning(k)) << " |\n";
  return out.str();
}

std::string config_keys_text() {
  std::ostringstream out;
  for (const ConfigKey& k : config_schema()) {
    out << k.shown_name() << ": " << k.type_text() << ", default " << k.default_text();
    if (!k.allowed.text().empty()) out << "; allowed: " << k.allowed.text();
    out << "\n    " << meaning(k) << "\n";
  }
  return out.str();
}

std::string flag_help(const ConfigKey& k) {
  if (k.type == KeyType::boolean) return k.help;
  return k.help + " [" + k.default_text() + "]";
}

}  // namespace convoy::train
