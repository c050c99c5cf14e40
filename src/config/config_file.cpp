// Config files and --set overrides, assembled as JSON before the keys are
// typed: a --set value is checked exactly as the same key in a file.
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string_view>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/config/config_schema.h"
#include "convoy/config/run_config.h"
#include "config/config_json.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The keys that name files or folders (KeyType::path): relative ones in a file are relative to its folder.
void resolve_paths(json& root, const fs::path& folder) {
  if (folder.empty() || !root.is_object()) return;
  for (const ConfigKey& key : config_schema()) {
    if (key.type != KeyType::path) continue;
    json* node = &root;
    std::size_t start = 0;
    for (auto dot = key.name.find('.'); node && dot != std::string::npos; dot = key.name.find('.', start)) {
      const auto s = node->find(key.name.substr(start, dot - start));
      node = s != node->end() && s->is_object() ? &*s : nullptr;
      start = dot + 1;
    }
    if (!node) continue;
    const auto v = node->find(key.name.substr(start));
    if (v == node->end() || !v->is_string()) continue;  // a wrong type is reported by the typed read
    const fs::path p(v->get<std::string>());
    if (!p.empty() && p.is_relative()) *v = (folder / p).lexically_normal().string();
  }
}

// A config's format: its extension when it has one of ours; otherwise its
// content (`--config <(...)` is /dev/fd/63): JSON is an object, so it opens
// with '{' after blanks (and a byte-order mark); anything else is read as YAML.
bool reads_as_yaml(const std::string& path, std::string_view text) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".yaml" || ext == ".yml") return true;
  if (ext == ".json") return false;
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  const auto first = text.find_first_not_of(" \t\r\n");
  return first == std::string_view::npos || text[first] != '{';
}

struct ConfigFile {
  json root;
  bool regular = true;  // false: a pipe, whose folder (/dev/fd) anchors no relative path
};

ConfigFile read_config_file(const std::string& path) {
  std::error_code ec;
  require(!fs::is_directory(path, ec), path + ": is a folder, not a config file; pass a .yaml, .yml or .json file");
  std::string text;
  const FileRead read = read_file_into(path, {.what = "run config", .max_bytes = kMaxConfigBytes}, [&](std::size_t n) {
    text.resize(n);
    return text.data();
  });
  return {config_text_to_json(text, path, reads_as_yaml(path, text)), read.regular};
}

// "optimizer.lr=3e-4" as {"optimizer": {"lr": 0.0003}}, merged into `root`.
void apply_set(json& root, const std::string& assignment) {
  const std::string where = "--set " + shown(assignment);
  const auto eq = assignment.find('=');
  require(eq != std::string::npos && eq > 0, where + ": write KEY=VALUE, e.g. --set optimizer.lr=3e-4");
  const std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  json parsed = config_text_to_json("v: " + (value.empty() ? std::string("''") : value), where, /*yaml=*/true);
  json* node = &root;
  std::size_t start = 0;
  while (true) {
    const auto dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    require(!part.empty(), where + ": '" + shown(key) + "' is not a dotted key like optimizer.lr");
    if (dot == std::string::npos) {
      (*node)[part] = parsed["v"];
      return;
    }
    json& next = (*node)[part];
    if (!next.is_object()) next = json::object();  // --set replaces a scalar there
    node = &next;
    start = dot + 1;
  }
}

void collect_keys(const json& j, const std::string& prefix, std::set<std::string>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    out.insert(key);
    if (it->is_object()) collect_keys(*it, key, out);
  }
}

}  // namespace

RunConfig load_run_config(const std::string& path) { return load_run_config(path, {}).config; }

LoadedConfig load_run_config(const std::string& path, const std::vector<std::string>& sets) {
  json root = json::object();
  if (!path.empty()) {
    ConfigFile file = read_config_file(path);
    root = std::move(file.root);
    // A piped config's relative paths are the working folder's, as on the command line.
    if (root.is_object() && file.regular) resolve_paths(root, fs::path(path).parent_path());
  }
  for (const auto& s : sets) {
    // Alone first, so that its own errors (unknown key, wrong type) name the --set, not the file.
    json alone = json::object();
    apply_set(alone, s);
    config_from_json(alone, "--set " + shown(s), /*check_values=*/false);
    apply_set(root, s);
  }
  LoadedConfig out;
  out.config = config_from_json(root, path.empty() ? std::string("--set") : path);
  if (root.is_object()) collect_keys(root, "", out.given);
  return out;
}

}  // namespace convoy::train
