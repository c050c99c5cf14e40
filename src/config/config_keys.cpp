// What a config key allows, shows and checks (config_schema.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/config/config_schema.h"

namespace convoy::train {
namespace {

using json = nlohmann::json;

std::string number_text(double v) {
  char out[32];
  std::snprintf(out, sizeof out, "%g", v);
  return out;
}

std::string listed(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

}  // namespace

std::string Allowed::text() const {
  if (!note.empty()) return note;
  if (!choices.empty()) return listed(choices);
  if (min && max)
    return std::string("in ") + (min_open ? "(" : "[") + number_text(*min) + ", " + number_text(*max) +
           (max_open ? ")" : "]");
  if (min) return min_open ? (*min == 0 ? "positive" : "above " + number_text(*min)) : "at least " + number_text(*min);
  if (max) return (max_open ? "below " : "at most ") + number_text(*max);
  return "";
}

bool Allowed::admits(double v) const {
  if (!choices.empty())
    return std::any_of(choices.begin(), choices.end(), [&](const std::string& c) { return std::stod(c) == v; });
  if (min && (min_open ? v <= *min : v < *min)) return false;
  if (max && (max_open ? v >= *max : v > *max)) return false;
  return !std::isnan(v);
}

bool Allowed::admits(const std::string& v) const {
  return choices.empty() || std::find(choices.begin(), choices.end(), v) != choices.end();
}

ConfigKey ConfigKey::omitted_when_empty() && {
  write = [inner = std::move(write)](const RunConfig& c) -> std::optional<json> {
    auto v = inner(c);
    if (v && v->is_string() && v->get<std::string>().empty()) return std::nullopt;
    return v;
  };
  return std::move(*this);
}

std::string ConfigKey::type_text() const {
  if (!type_shown.empty()) return type_shown;
  switch (type) {
    case KeyType::boolean: return "true/false";
    case KeyType::whole: return "whole number";
    case KeyType::number: return "number";
    case KeyType::text: return "string";
    case KeyType::path: return "path";
    case KeyType::numbers: return "list of numbers";
    case KeyType::texts: return "list of strings";
    case KeyType::structure: return "mapping";
  }
  return "";
}

std::string ConfigKey::default_text() const {
  if (!default_shown.empty()) return default_shown;
  static const RunConfig defaults;
  const std::optional<json> v = write(defaults);
  if (!v || v->is_null() || (v->is_string() && v->get<std::string>().empty()) || (v->is_array() && v->empty()))
    return "none";
  if (v->is_number_float()) return number_text(v->get<double>());
  return v->is_string() ? v->get<std::string>() : v->dump();
}

void check_config_key(const ConfigKey& k, const RunConfig& c) {
  if (const std::optional<json> v = k.write(c)) {
    // Configs are stored as JSON in checkpoints and summaries, which hold UTF-8 only.
    try {
      (void)v->dump();
    } catch (const json::exception&) {
      throw UserError(k.shown_name() + ": " + shown_json(*v) + " is not valid UTF-8; use a name in UTF-8");
    }
    const Allowed& a = k.allowed;
    if (v->is_number() && (a.min || a.max || !a.choices.empty()))
      require(a.admits(v->get<double>()), k.shown_name() + " must be " + a.text() + ", got " + shown_json(*v));
    if (v->is_string() && !a.choices.empty())
      require(a.admits(v->get<std::string>()),
              k.shown_name() + ": '" + shown(v->get<std::string>()) + "' is not " + a.text());
  }
  if (k.check) k.check(c);
}

}  // namespace convoy::train
