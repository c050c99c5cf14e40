#include "convoy/nn/zoo.h"

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::nn {
namespace {

struct Entry {
  const char* name;
  Model (*make)(const ZooOptions&);
};

const Entry kZoo[] = {
    {"seed_cnn", [](const ZooOptions&) { return seed_cnn(); }},
    {"plant_cnn", plant_cnn},
    {"resnet18", resnet18},
    {"resnet34", resnet34},
    {"resnet50", resnet50},
    {"mobilenet_v2", mobilenet_v2},
    {"efficientnet_b0", efficientnet_b0},
    {"efficientnet_lite0", efficientnet_lite0},
    {"tf_efficientnet_lite0", tf_efficientnet_lite0},
};

}  // namespace

std::vector<std::string> zoo_names() {
  std::vector<std::string> names;
  for (const auto& e : kZoo) names.push_back(e.name);
  return names;
}

Model model_by_name(const std::string& name, const ZooOptions& options) {
  for (const auto& e : kZoo)
    if (name == e.name) return e.make(options);
  std::string known;
  for (const auto& e : kZoo) known += (known.empty() ? "" : ", ") + std::string(e.name);
  throw UserError("unknown model '" + shown(name) + "'; available: " + known);
}

}  // namespace convoy::nn
