#pragma once
// Every run-config key declared once — dotted
// name, type, what it allows, help, and its flag — in one table
// (config_schema.cpp). The table drives reading a config (files, --set and
// flags), validate()'s per-key checks, run_config_json (summary.json and
// checkpoints), `convoy train`'s flags and --help lines, and the README's
// key table (`convoy help config --markdown`, checked by a test). A key's
// default is RunConfig's own member initialiser, shown from RunConfig{}.
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convoy/config/run_config.h"

namespace convoy::train {

// How a key's value is written in a config. `path`: a string naming a file or
// folder, relative to the config file's folder when written in a file.
// `structure`: a mapping or list read by its own parser (layers, callbacks).
enum class KeyType { boolean, whole, number, text, path, numbers, texts, structure };

// What a key allows beyond its type, shown in help and checked by validate():
// a numeric range, or a list of names.
struct Allowed {
  std::optional<double> min, max;
  bool min_open = false, max_open = false;  // (min, ...) rather than [min, ...
  std::vector<std::string> choices;
  std::string note;  // said instead of the generated text ("0 (off) or positive")
  std::string text() const;  // "at least 1", "in [0, 1)", "single, mpi or nccl"
  bool admits(double v) const;
  bool admits(const std::string& v) const;
};

struct ConfigKey {
  std::string name;  // dotted, as in a file: "optimizer.lr"
  KeyType type = KeyType::text;
  Allowed allowed;
  std::string help;     // one line: the flag's --help text and the README's meaning
  std::string details;  // more for the README and `convoy help config` (not --help)
  std::string flag;     // "--lr"; empty: config and --set only
  std::string default_shown;  // empty: RunConfig{}'s value as written
  bool images_only = false;   // read only for image data: written and checked only then
  bool how_to_run = false;    // its flag may change on --resume (how to run, not what to train)
  // Reads a value into the config: the type checked, a message naming `where` and the key.
  std::function<void(const nlohmann::json&, RunConfig&, const std::string& where)> read;
  // The value as run_config_json writes it; nullopt: left out.
  std::function<std::optional<nlohmann::json>(const RunConfig&)> write;
  // Throws a one-line UserError naming the key (and flag), the value and what is allowed.
  std::function<void(const RunConfig&)> check;

  bool always_checked = false;  // checked even when images_only keeps it out of an IDX run's config

  std::string shown_name() const { return flag.empty() ? name : name + " (" + flag + ")"; }
  std::string type_shown;  // instead of the type's own name (structures: "mapping")
  std::string type_text() const;
  std::string default_text() const;

  // Declaring the table (config_schema.cpp): key(...).with_flag("--lr").with_default("...").
  ConfigKey with_flag(std::string f) && { flag = std::move(f); return std::move(*this); }
  ConfigKey with_default(std::string d) && { default_shown = std::move(d); return std::move(*this); }
  ConfigKey with_details(std::string d) && { details = std::move(d); return std::move(*this); }
  ConfigKey run_setting() && { how_to_run = true; return std::move(*this); }
  ConfigKey checked_always() && { always_checked = true; return std::move(*this); }
  ConfigKey omitted_when_empty() &&;
};

// In the order of run_config_json's sections and the README's table.
const std::vector<ConfigKey>& config_schema();
// The key named `dotted`; null if none.
const ConfigKey* find_config_key(const std::string& dotted);
// Whether `dotted` is a section holding keys ("data", "data.augment").
bool is_config_section(const std::string& dotted);
// The names directly under a section ("" for the top level): keys and sections.
std::set<std::string> config_children(const std::string& section);

// The checks of one key on a whole config (its range or names, UTF-8, its own
// check); throws a one-line UserError naming the key, the value and what is allowed.
void check_config_key(const ConfigKey& key, const RunConfig& config);

// A flag's or --set's text as the JSON value a file would hold: strings and
// paths as given, anything else as YAML reads it (3, 1e-3, true, [0.5, 0.5]).
nlohmann::json config_value_from_text(const ConfigKey& key, const std::string& text, const std::string& where);

// The table of every key, as the README holds it between its markers.
std::string config_keys_markdown();
// The same, for a terminal: one paragraph per key.
std::string config_keys_text();
// A key's flag line in `convoy train --help`: the help and the default.
std::string flag_help(const ConfigKey& key);

}  // namespace convoy::train
