#include "train/layer_config.h"

#include <map>

#include "convoy/core/error.h"
#include "convoy/nn/zoo.h"
#include "train/config_section.h"

namespace convoy::train {
namespace {

using nlohmann::json;

template <class... Ts> struct Overloaded : Ts... { using Ts::operator()...; };
template <class... Ts> Overloaded(Ts...) -> Overloaded<Ts...>;

const char* kKnownTypes = "conv2d, max_pool2d, relu, batch_norm, flatten, dense, log_softmax, add, concat";

// Reads the options of one layer type from its section.
nn::Layer layer_of_type(const std::string& type, Section& s) {
  if (type == "conv2d") {
    nn::Conv2d c{.filters = 0, .kernel = 0};
    s.get("filters", c.filters);
    s.get("kernel", c.kernel);
    s.get("stride", c.stride);
    s.get("padding", c.padding);
    require(c.filters > 0 && c.kernel > 0, s.where() + ": '" + s.dotted("filters") + "' and '" + s.dotted("kernel") +
                                               "' are required and must be positive");
    return c;
  }
  if (type == "max_pool2d") {
    nn::MaxPool2d p{.kernel = 0};
    s.get("kernel", p.kernel);
    s.get("stride", p.stride);
    require(p.kernel > 0, s.where() + ": '" + s.dotted("kernel") + "' is required and must be positive");
    return p;
  }
  if (type == "batch_norm") {
    nn::BatchNorm b;
    s.get("momentum", b.momentum);
    s.get("eps", b.eps);
    return b;
  }
  if (type == "dense") {
    nn::Dense d{.units = 0};
    s.get("units", d.units);
    require(d.units > 0, s.where() + ": '" + s.dotted("units") + "' is required and must be positive");
    return d;
  }
  if (type == "relu") return nn::ReLU{};
  if (type == "flatten") return nn::Flatten{};
  if (type == "log_softmax") return nn::LogSoftmax{};
  if (type == "add") return nn::Add{};
  if (type == "concat") return nn::Concat{};
  throw UserError(s.where() + ": " + s.dotted("type") + ": unknown layer type '" + type + "'; known: " + kKnownTypes);
}

}  // namespace

std::vector<LayerSpec> layers_from_json(const json& list, const std::string& where) {
  require(list.is_array() && !list.empty(), where + ": 'model.layers' must be a non-empty list of layers");
  std::vector<LayerSpec> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = "model.layers[" + std::to_string(i) + "]";
    const json item = list[i].is_string() ? json{{"type", list[i]}} : list[i];
    Section s(item, where, at);
    std::string type;
    s.get("type", type);
    require(!type.empty(), where + ": '" + at + ".type' is required (one of " + kKnownTypes + ")");
    LayerSpec spec{.layer = layer_of_type(type, s), .inputs = {}};
    if (const json* inputs = s.raw("inputs")) {
      require(inputs->is_array() && !inputs->empty() &&
                  std::all_of(inputs->begin(), inputs->end(), [](const json& v) { return v.is_string(); }),
              where + ": '" + at + ".inputs' must be a list of layer names (or 'input')");
      for (const auto& v : *inputs) spec.inputs.push_back(v.get<std::string>());
    }
    s.finish();
    out.push_back(std::move(spec));
  }
  return out;
}

json layers_to_json(const std::vector<LayerSpec>& layers) {
  json list = json::array();
  for (const auto& spec : layers) {
    json j = std::visit(Overloaded{
                            [](const nn::Conv2d& c) -> json {
                              return {{"filters", c.filters}, {"kernel", c.kernel}, {"stride", c.stride},
                                      {"padding", c.padding}};
                            },
                            [](const nn::MaxPool2d& p) -> json { return {{"kernel", p.kernel}, {"stride", p.stride}}; },
                            [](const nn::BatchNorm& b) -> json { return {{"momentum", b.momentum}, {"eps", b.eps}}; },
                            [](const nn::Dense& d) -> json { return {{"units", d.units}}; },
                            [](const auto&) -> json { return json::object(); },
                        },
                        spec.layer);
    j["type"] = nn::kind_name(spec.layer);
    if (!spec.inputs.empty()) j["inputs"] = spec.inputs;
    list.push_back(std::move(j));
  }
  return list;
}

nn::Model build_model(const RunConfig& c, const Shape& input_shape) {
  if (c.layers.empty()) return nn::model_by_name(c.model);
  // Names as the model will give them (kind_0, kind_1, ...), to resolve inputs.
  std::map<std::string, int> index{{"input", nn::kModelInput}};
  std::map<std::string, int> counts;
  std::vector<std::pair<nn::Layer, std::vector<int>>> graph;
  for (std::size_t i = 0; i < c.layers.size(); ++i) {
    const LayerSpec& spec = c.layers[i];
    std::vector<int> inputs;
    if (spec.inputs.empty()) inputs.push_back(static_cast<int>(i) - 1);
    for (const auto& name : spec.inputs) {
      auto it = index.find(name);
      require(it != index.end(), "model.layers[" + std::to_string(i) + "].inputs: no earlier layer is named '" + name +
                                     "' (layers are named kind_N, counted per kind: conv2d_0, relu_0, conv2d_1, ...; the model's input "
                                     "is 'input')");
      inputs.push_back(it->second);
    }
    const std::string kind = nn::kind_name(spec.layer);
    index[kind + "_" + std::to_string(counts[kind]++)] = static_cast<int>(i);
    graph.push_back({spec.layer, std::move(inputs)});
  }
  return nn::Model(input_shape, std::move(graph));
}

}  // namespace convoy::train
