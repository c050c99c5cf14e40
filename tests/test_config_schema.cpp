// The run-config schema (config_schema.h): each key declared once drives
// reading, checking, run_config_json and the README's table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "convoy/core/error.h"
#include "convoy/config/config_schema.h"
#include "convoy/config/run_config.h"
#include "test_helpers.h"

namespace convoy::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::error_of;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The lines between the README's config-keys markers.
std::string readme_table() {
  const std::string readme = read_text(std::string(CONVOY_SOURCE_DIR) + "/README.md");
  const auto begin = readme.find("<!-- config-keys:begin");
  const auto end = readme.find("<!-- config-keys:end");
  if (begin == std::string::npos || end == std::string::npos || end < begin) return "(no config-keys markers)";
  const auto first = readme.find('\n', begin) + 1;
  return readme.substr(first, end - first);
}

TEST(ConfigSchema, TheReadmeTableIsTheSchemas) {
  EXPECT_EQ(readme_table(), config_keys_markdown())
      << "README.md's table of config keys differs from config_schema(); run tools/readme_config_table.sh";
}

TEST(ConfigSchema, NamesAndFlagsAreUniqueAndEveryKeyIsComplete) {
  std::set<std::string> names, flags;
  for (const ConfigKey& k : config_schema()) {
    EXPECT_TRUE(names.insert(k.name).second) << k.name << " is declared twice";
    if (!k.flag.empty()) {
      EXPECT_TRUE(flags.insert(k.flag).second) << k.flag << " is two keys' flag";
    }
    EXPECT_FALSE(k.help.empty()) << k.name;
    EXPECT_TRUE(k.read && k.write) << k.name;
    EXPECT_FALSE(is_config_section(k.name)) << k.name << " is both a key and a section";
  }
}

// The table shows RunConfig's own defaults (the README once said 0 for --dist-bucket-kib; the code 16).
TEST(ConfigSchema, DefaultsShownAreTheStructsDefaults) {
  static const RunConfig kDefaults;
  EXPECT_EQ(find_config_key("distributed.bucket_kib")->default_text(), std::to_string(kDefaults.bucket_kib));
  EXPECT_EQ(find_config_key("training.epochs")->default_text(), "50");
  EXPECT_EQ(find_config_key("distributed.timeout_seconds")->default_text(), "60");
  EXPECT_EQ(find_config_key("data.augment.cutout_size")->default_text(), "0.25");
  EXPECT_EQ(find_config_key("output.progress")->default_text(), "auto");
  EXPECT_EQ(find_config_key("distributed.bucket_kib")->flag, "--dist-bucket-kib");
  EXPECT_NE(flag_help(*find_config_key("distributed.bucket_kib")).find("[16]"), std::string::npos);
}

// Every key of an image config, written by run_config_json, is a key of the
// schema, and reads back to the same text.
TEST(ConfigSchema, EveryWrittenKeyIsDeclaredAndRoundTrips) {
  RunConfig c = parse_run_config(
      "data: {kind: folders, class_weight: {a: 2}}\ncallbacks: {early_stopping: {}, reduce_lr_on_plateau: {}}\n"
      "model: {name: m, layers: [flatten, {type: dense, units: 2}], pretrained: /w.safetensors, head: dense_1}\n",
      "c.yaml", true);
  const json written = json::parse(run_config_json(c));
  std::set<std::string> seen;
  const std::function<void(const json&, const std::string&)> walk = [&](const json& j, const std::string& prefix) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string name = prefix.empty() ? it.key() : prefix + "." + it.key();
      if (find_config_key(name)) seen.insert(name);
      else if (it->is_object() && is_config_section(name)) walk(*it, name);
      else ADD_FAILURE() << name << " is written but not declared";
    }
  };
  walk(written, "");
  EXPECT_EQ(seen.size(), config_schema().size());  // an image config with every optional part writes every key
  EXPECT_EQ(run_config_json(parse_run_config(written.dump(), "again", false)), written.dump(2));
}

TEST(ConfigSchema, ARangeErrorNamesTheKeyTheFlagTheValueAndWhatIsAllowed) {
  const auto error = [](const std::string& yaml) { return error_of([&] { parse_run_config(yaml, "c.yaml", true); }); };
  EXPECT_NE(error("training: {batch_size: 0}").find("c.yaml: training.batch_size (--batch-size) must be at least 1, got 0"),
            std::string::npos);
  EXPECT_NE(error("optimizer: {beta2: 1}").find("optimizer.beta2 must be in [0, 1), got 1"), std::string::npos);
  EXPECT_NE(error("output: {progress: loud}").find("output.progress (--progress): 'loud' is not auto, bar, lines or quiet"),
            std::string::npos);
  EXPECT_NE(error("data: {kind: csv, channels: 2}").find("data.channels must be 1 or 3, got 2"), std::string::npos);
  EXPECT_NE(error("data: {kind: csv, augment: {fill_value: 300}}").find("'data.augment.fill_value' must be in [0, 255], got 300"),
            std::string::npos);
  // A hole count or a chunk of steps that could never finish is refused, not run.
  EXPECT_NE(error("data: {kind: csv, augment: {cutout: 1000000000}}").find("data.augment.cutout must be in [0, 64]"),
            std::string::npos);
  EXPECT_NE(error("training: {steps_per_execution: 100000}").find("training.steps_per_execution must be in [1, 1024]"),
            std::string::npos);
  // Image keys are not checked (nor written) for Fashion-MNIST's IDX data, which does not read them.
  EXPECT_NO_THROW(parse_run_config("data: {channels: 2}", "c.yaml", true));
  EXPECT_NE(error("data: {kind: jpeg}").find("data.kind: 'jpeg' is not idx, csv, folders or tfrecord"), std::string::npos);
}

TEST(ConfigSchema, FlagTextIsTypedAsTheKeyInAFile) {
  const ConfigKey& lr = *find_config_key("optimizer.lr");
  EXPECT_EQ(config_value_from_text(lr, "3e-4", "--lr"), json(3e-4));
  const ConfigKey& out = *find_config_key("output.dir");
  EXPECT_EQ(config_value_from_text(out, "true", "--out"), json("true"));  // a path stays text
  RunConfig c;
  EXPECT_NE(error_of([&] { lr.read(config_value_from_text(lr, "fast", "--lr"), c, "--lr"); })
                .find("--lr: 'optimizer.lr' must be a number, got \"fast\""),
            std::string::npos);
  // --lr nan and --lr -inf are refused as they are read, for every float key, and shown as given (JSON, the
  // summaries' format, would print null).
  for (const std::string given : {"nan", "-inf"}) {
    c.lr = 1;
    const std::string message = error_of([&] { lr.read(config_value_from_text(lr, given, "--lr"), c, "--lr"); });
    EXPECT_NE(message.find("'optimizer.lr' must be a finite number"), std::string::npos) << message;
    EXPECT_NE(message.find("got " + given), std::string::npos) << message;
  }
}

// Keys held as double but narrowed to float where they are used took 1e300
// and trained with inf: each is refused with optimizer.lr's float bound.
TEST(ConfigSchema, FloatNarrowedKeysAreBoundedByWhatAFloatHolds) {
  for (const char* key : {"transfer.fine_tune_lr", "optimizer.lr", "optimizer.weight_decay", "optimizer.clip_norm",
                          "schedule.gamma", "schedule.min_lr", "schedule.max_lr"}) {
    const std::string dotted(key), section = dotted.substr(0, dotted.find('.')), name = dotted.substr(dotted.find('.') + 1);
    const std::string message =
        error_of([&] { parse_run_config("{\"" + section + "\": {\"" + name + "\": 1e300}}", "c.json", false); });
    EXPECT_NE(message.find(key), std::string::npos) << message;
    EXPECT_NE(message.find("3.4e38"), std::string::npos) << message;
    EXPECT_NO_THROW(parse_run_config("{\"" + section + "\": {\"" + name + "\": 3e38}}", "c.json", false)) << key;
  }
}

TEST(ConfigSchema, EveryShippedConfigLoadsAndRoundTrips) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator(std::string(CONVOY_SOURCE_DIR) + "/configs")) {
    const RunConfig c = load_run_config(entry.path().string());
    const std::string text = run_config_json(c);
    EXPECT_EQ(run_config_json(parse_run_config(text, "again", false)), text) << entry.path();
    ++n;
  }
  EXPECT_GE(n, 3);
}

}  // namespace
}  // namespace convoy::train
