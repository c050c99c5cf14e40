#include "config/layer_config.h"

#include <cmath>
#include <map>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/nn/zoo.h"
#include "config/config_section.h"
#include "config/float_text.h"

namespace convoy::train {
namespace {

using nlohmann::json;

template <class... Ts> struct Overloaded : Ts... { using Ts::operator()...; };
template <class... Ts> Overloaded(Ts...) -> Overloaded<Ts...>;

const char* kKnownTypes =
    "conv2d, max_pool2d, avg_pool2d, global_avg_pool, dropout, relu, relu6, silu, sigmoid, batch_norm, flatten, "
    "dense, log_softmax, add, concat, multiply, clip, affine";

// `padding`: a whole number of pixels or "same" (Keras's padding="same").
void read_padding(Section& s, int64_t& padding) {
  if (const json* p = s.raw("padding"); p && p->is_string()) {
    require(p->get<std::string>() == "same",
            s.where() + ": '" + s.dotted("padding") + "' must be a whole number of pixels or \"same\"");
    padding = nn::kSame;
    return;
  }
  s.get("padding", padding);
  require(padding >= 0, s.where() + ": '" + s.dotted("padding") + "' must be >= 0 or \"same\"");
}

json padding_json(int64_t padding) { return padding == nn::kSame ? json("same") : json(padding); }

void require_kernel(Section& s, int64_t kernel) {
  require(kernel > 0, s.where() + ": '" + s.dotted("kernel") + "' is required and must be positive");
}

// Reads the options of one layer type from its section.
nn::Layer layer_of_type(const std::string& type, Section& s) {
  if (type == "conv2d") {
    nn::Conv2d c{.filters = 0, .kernel = 0};
    s.get("filters", c.filters);
    s.get("kernel", c.kernel);
    s.get("stride", c.stride);
    read_padding(s, c.padding);
    s.get("groups", c.groups);
    s.get("bias", c.bias);
    require(c.filters > 0 && c.kernel > 0, s.where() + ": '" + s.dotted("filters") + "' and '" + s.dotted("kernel") +
                                               "' are required and must be positive");
    require(c.groups > 0 && c.filters % c.groups == 0,
            s.where() + ": '" + s.dotted("groups") + "' must be positive and divide the filters");
    return c;
  }
  if (type == "max_pool2d") {
    nn::MaxPool2d p{.kernel = 0};
    s.get("kernel", p.kernel);
    s.get("stride", p.stride);
    read_padding(s, p.padding);
    require_kernel(s, p.kernel);
    return p;
  }
  if (type == "avg_pool2d") {
    nn::AvgPool2d p{.kernel = 0};
    s.get("kernel", p.kernel);
    s.get("stride", p.stride);
    read_padding(s, p.padding);
    s.get("count_include_pad", p.count_include_pad);
    require_kernel(s, p.kernel);
    return p;
  }
  if (type == "global_avg_pool") {
    nn::GlobalAvgPool g;
    s.get("keep_dims", g.keep_dims);
    return g;
  }
  if (type == "dropout") {
    nn::Dropout d;
    s.get("rate", d.rate);
    require(d.rate >= 0 && d.rate < 1, s.where() + ": '" + s.dotted("rate") + "' must be in [0, 1)");
    return d;
  }
  if (type == "batch_norm") {
    nn::BatchNorm b;
    s.get("momentum", b.momentum);
    s.get("eps", b.eps);
    if (const char* why = batch_norm_eps_fault(b.eps))
      throw UserError(s.where() + ": '" + s.dotted("eps") + "' " + why + " (e.g. 1e-5), got " + float_text(b.eps));
    if (const char* why = batch_norm_momentum_fault(b.momentum))
      throw UserError(s.where() + ": '" + s.dotted("momentum") + "' " + why + " (e.g. 0.1), got " + float_text(b.momentum));
    return b;
  }
  if (type == "dense") {
    nn::Dense d{.units = 0};
    s.get("units", d.units);
    require(d.units > 0, s.where() + ": '" + s.dotted("units") + "' is required and must be positive");
    return d;
  }
  if (type == "clip") {  // a bound left out is absent (infinite)
    nn::Clip c;
    s.get("min", c.min);
    s.get("max", c.max);
    require(!(c.min > c.max), s.where() + ": '" + s.dotted("min") + "' must not be above '" + s.dotted("max") + "'");
    return c;
  }
  if (type == "affine") return nn::Affine{};
  if (type == "relu") return nn::ReLU{};
  if (type == "relu6") return nn::ReLU6{};
  if (type == "silu") return nn::SiLU{};
  if (type == "sigmoid") return nn::Sigmoid{};
  if (type == "multiply") return nn::Multiply{};
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
                                      {"padding", padding_json(c.padding)}, {"groups", c.groups}, {"bias", c.bias}};
                            },
                            [](const nn::MaxPool2d& p) -> json {
                              return {{"kernel", p.kernel}, {"stride", p.stride}, {"padding", padding_json(p.padding)}};
                            },
                            [](const nn::AvgPool2d& p) -> json {
                              return {{"kernel", p.kernel}, {"stride", p.stride}, {"padding", padding_json(p.padding)},
                                      {"count_include_pad", p.count_include_pad}};
                            },
                            [](const nn::GlobalAvgPool& g) -> json { return {{"keep_dims", g.keep_dims}}; },
                            [](const nn::Dropout& d) -> json { return {{"rate", as_written(d.rate)}}; },
                            [](const nn::BatchNorm& b) -> json { return {{"momentum", as_written(b.momentum)}, {"eps", as_written(b.eps)}}; },
                            [](const nn::Dense& d) -> json { return {{"units", d.units}}; },
                            [](const nn::Clip& c) -> json {  // JSON has no infinity: an absent bound is left out
                              json j = json::object();
                              if (!std::isinf(c.min)) j["min"] = c.min;
                              if (!std::isinf(c.max)) j["max"] = c.max;
                              return j;
                            },
                            [](const auto&) -> json { return json::object(); },
                        },
                        spec.layer);
    j["type"] = nn::kind_name(spec.layer);
    if (!spec.inputs.empty()) j["inputs"] = spec.inputs;
    list.push_back(std::move(j));
  }
  return list;
}

nn::Model build_model(const RunConfig& c, const Shape& input_shape, int64_t classes) {
  if (c.layers.empty()) return nn::model_by_name(c.model, {.input = input_shape, .classes = classes});
  // Names as the model will give them (kind_0, kind_1, ...), to resolve inputs.
  std::map<std::string, int> index{{"input", nn::kModelInput}};
  std::map<std::string, int> counts;
  std::vector<nn::Node> graph;
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
    graph.push_back({.layer = spec.layer, .inputs = std::move(inputs)});
  }
  return nn::Model(input_shape, std::move(graph));
}

}  // namespace convoy::train
