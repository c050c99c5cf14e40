#pragma once
// Private to config/: reads one JSON object of a run config into typed
// fields. Anything not read is an unknown key; messages name the file and
// the dotted key ("configs/x.yaml: 'optimizer.lr' must be a number").
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "config/config_keys.h"

namespace convoy::train {

// The names of `known` a typo of `key` could stand for: a small edit
// distance, or one containing the other ("learning_rate" and "lr" excepted).
std::vector<std::string> close_matches(const std::string& key, const std::set<std::string>& known);
// The error for `key` of section `prefix` ("" for the top level), which no one
// reads: the close keys of `known`, and the list of them.
UserError unknown_key(const std::string& where, const std::string& prefix, const std::string& key,
                      const std::set<std::string>& known);

// Reads one JSON object's keys into typed fields; anything not read is an
// unknown key. Messages name the file and the dotted key.
class Section {
  using json = nlohmann::json;

 public:
  Section(const json& j, std::string where, std::string prefix)
      : j_(j), where_(std::move(where)), prefix_(std::move(prefix)) {
    require(j.is_object(), where_ + ": '" + (prefix_.empty() ? "(top level)" : prefix_) + "' must be a mapping");
  }

  template <class T> void get(const char* key, T& out) {
    known_.insert(key);
    auto it = j_.find(key);
    if (it != j_.end()) read_typed(*it, out, dotted(key), {}, where_);  // typed as a config key's value
  }

  Section sub(const char* key) {
    known_.insert(key);
    static const json empty = json::object();
    auto it = j_.find(key);
    return Section(it == j_.end() ? empty : *it, where_, dotted(key));
  }
  bool has(const char* key) const { return j_.contains(key); }
  // The raw value of a key (marked known), for lists the caller walks itself.
  const json* raw(const char* key) {
    known_.insert(key);
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  const std::string& where() const { return where_; }
  std::string dotted(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  // Throws for the first key nobody read.
  void finish() const {
    for (auto& [k, v] : j_.items()) {
      if (!known_.count(k)) throw unknown_key(where_, prefix_, k, known_);
    }
  }

 private:
  const json& j_;
  std::string where_, prefix_;
  std::set<std::string> known_;
};

}  // namespace convoy::train
