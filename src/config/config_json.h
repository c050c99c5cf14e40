#pragma once
// Private to config/: the steps of reading a run config, for the readers that
// change the JSON tree before it is typed (config files with --set overrides
// and config-relative paths, config_file.cpp).
#include <string>

#include <nlohmann/json.hpp>

#include "convoy/config/run_config.h"

namespace convoy::train {

// JSON, or YAML (anchors bounded, duplicate keys refused) as JSON; an empty text is {}.
nlohmann::json config_text_to_json(const std::string& text, const std::string& where, bool yaml);
// Every key typed and checked (unknown keys, types; with check_values also
// the ranges, validate()); messages name `where` and the dotted key.
RunConfig config_from_json(const nlohmann::json& root, const std::string& where, bool check_values = true);

}  // namespace convoy::train
