#include "convoy/nn/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>

#include "convoy/core/error.h"
#include "convoy/core/rng.h"

namespace convoy::nn {
namespace {

// Learned tensors of one layer, in PyTorch's order and layouts
// (conv weight [O, I, kh, kw], dense weight [O, I]).
std::vector<ParamSlot> learned_slots(const Layer& layer, const Shape& in) {
  if (auto* c = std::get_if<Conv2d>(&layer)) {
    std::vector<ParamSlot> slots{{"weight", {c->filters, in[0] / c->groups, c->kernel, c->kernel}}};
    if (c->bias) slots.push_back({"bias", {c->filters}});
    return slots;
  }
  if (auto* d = std::get_if<Dense>(&layer)) return {{"weight", {d->units, in[0]}}, {"bias", {d->units}}};
  if (std::holds_alternative<BatchNorm>(layer)) return {{"weight", {in[0]}}, {"bias", {in[0]}}};
  if (std::holds_alternative<Affine>(layer)) return {{"weight", in}, {"bias", in}};
  return {};
}

std::vector<ParamSlot> state_slots(const Layer& layer, const Shape& in) {
  if (std::holds_alternative<BatchNorm>(layer)) return {{"running_mean", {in[0]}}, {"running_var", {in[0]}}};
  return {};
}

// Every tensor a layer makes or learns within kMaxValuesPerExample, checked
// as soon as its shape is known: later layers' shapes, the flat buffers'
// offsets and the summary's counts then cannot overflow, and a model no
// machine could train (a padding of 10^9, 10^8 filters) is refused by name
// before anything is allocated for it.
void require_bounded_sizes(const LayerPlan& plan) {
  const auto too_big = [&](const std::string& what, const Shape& shape) {
    const double values = std::accumulate(shape.begin(), shape.end(), 1.0,
                                          [](double n, int64_t d) { return n * static_cast<double>(d); });
    char count[32];
    std::snprintf(count, sizeof count, "%.3g", values);
    throw UserError("model: " + plan.name + "'s " + what + " " + to_string(shape) + " would hold " + count +
                    " values, more than the 2^31 (8 GiB of floats) convoy takes in one tensor; use fewer filters "
                    "or units, less padding, or smaller images");
  };
  if (bounded_numel(plan.output_shape) < 0) too_big("output (per example)", plan.output_shape);
  for (const auto& slot : plan.params)
    if (bounded_numel(slot.shape) < 0) too_big(slot.name, slot.shape);
}

void place(std::vector<ParamSlot>& slots, const std::string& layer_name, int64_t& cursor) {
  for (auto& s : slots) {
    s.name = layer_name + "." + s.name;
    s.offset = cursor;
    cursor += s.size();
  }
}

}  // namespace

namespace {

std::vector<Node> chain(std::vector<Layer> layers) {
  std::vector<Node> graph;
  for (auto& layer : layers) graph.push_back({std::move(layer), {static_cast<int>(graph.size()) - 1}});
  return graph;
}

}  // namespace

Model::Model(Shape input_shape, std::vector<Layer> layers) : Model(std::move(input_shape), chain(std::move(layers))) {}

Model::Model(Shape input_shape, std::vector<Node> graph) : input_shape_(std::move(input_shape)) {
  require(!graph.empty(), "model: a model needs at least one layer");
  std::map<std::string, int> counts;
  std::map<std::string, int> index_of;
  std::vector<int> consumers(graph.size(), 0);
  for (auto& node : graph) {
    const int index = static_cast<int>(plans_.size());
    std::string kind = kind_name(node.layer);
    std::string name = node.name.empty() ? kind + "_" + std::to_string(counts[kind]++) : node.name;
    require(index_of.emplace(name, index).second,
            "model: two layers are named '" + name + "'; give each layer its own name");
    std::vector<Shape> shapes;
    for (int in : node.inputs) {
      require(in >= kModelInput && in < index,
              "model: " + name + " takes input " + std::to_string(in) + ", which is not an earlier layer");
      shapes.push_back(in == kModelInput ? input_shape_ : plans_[in].output_shape);
      if (in != kModelInput) ++consumers[in];
    }
    require(!shapes.empty(), "model: " + name + " has no input");
    LayerPlan plan{name,
                   node.layer,
                   shapes[0],
                   nn::output_shape(node.layer, shapes, name),
                   learned_slots(node.layer, shapes[0]),
                   state_slots(node.layer, shapes[0]),
                   node.inputs,
                   shapes,
                   node.trainable};
    require_bounded_sizes(plan);
    place(plan.params, name, num_params_);
    place(plan.state, name, num_state_);
    plans_.push_back(std::move(plan));
  }
  // A layer nobody reads would run for nothing and leave its gradient unset.
  for (std::size_t i = 0; i + 1 < plans_.size(); ++i)
    require(consumers[i] > 0, "model: the output of " + plans_[i].name +
                                  " is not used by any later layer; remove it or join it into the graph");
}

int Model::set_trainable(bool trainable, const std::string& prefix) {
  int matched = 0, changed = 0;
  for (auto& plan : plans_) {
    if (!prefix.empty() && plan.name != prefix && !plan.name.starts_with(prefix + ".")) continue;
    ++matched;
    changed += plan.trainable != trainable;
    plan.trainable = trainable;
  }
  require(matched > 0, "model: no layer is named '" + prefix + "' or starts with '" + prefix +
                           ".'; see the layer names in the model's summary");
  return changed;
}

int64_t Model::num_trainable_parameters() const {
  int64_t n = 0;
  for (const auto& plan : plans_)
    if (plan.trainable)
      for (const auto& p : plan.params) n += p.size();
  return n;
}

double activation_floats(const LayerPlan& plan) { return 2.0 * static_cast<double>(numel(plan.output_shape)); }

double activation_floats(const Model& model) {
  double floats = 2.0 * static_cast<double>(numel(model.input_shape()));
  for (const auto& plan : model.layers()) floats += activation_floats(plan);
  return floats;
}

const LayerPlan* Model::find_layer(const std::string& name) const {
  for (const auto& plan : plans_)
    if (plan.name == name) return &plan;
  return nullptr;
}

bool Model::is_chain() const {
  for (std::size_t i = 0; i < plans_.size(); ++i)
    if (plans_[i].inputs != std::vector<int>{static_cast<int>(i) - 1}) return false;
  return true;
}

GraphBuilder::Ref GraphBuilder::add(Layer layer, std::vector<Ref> ins, std::string name) {
  std::vector<int> inputs;
  for (Ref r : ins) inputs.push_back(r.index);
  graph_.push_back({std::move(layer), std::move(inputs), std::move(name)});
  return {static_cast<int>(graph_.size()) - 1};
}

Model GraphBuilder::build() const { return Model(input_shape_, graph_); }

const Shape& Model::output_shape() const { return plans_.back().output_shape; }

std::vector<float> Model::initial_parameters(uint64_t seed) const {
  std::vector<float> params(num_params_);
  Rng rng(seed);
  for (const auto& plan : plans_) {
    if (std::holds_alternative<BatchNorm>(plan.layer) || std::holds_alternative<Affine>(plan.layer)) {
      for (int64_t i = 0; i < plan.params[0].size(); ++i) params[plan.params[0].offset + i] = 1.0f;
      continue;  // shift stays 0
    }
    if (plan.params.empty()) continue;
    // kaiming_uniform(a=sqrt(5)) on the weight and the bias rule both give
    // bound 1/sqrt(fan_in), fan_in = weight elements per output unit.
    const ParamSlot& w = plan.params[0];
    float bound = 1.0f / std::sqrt(static_cast<float>(w.size() / w.shape[0]));
    for (const auto& slot : plan.params)
      for (int64_t i = 0; i < slot.size(); ++i) params[slot.offset + i] = rng.uniform(-bound, bound);
  }
  return params;
}

std::vector<float> Model::initial_state() const {
  std::vector<float> state(num_state_);
  for (const auto& plan : plans_)
    for (const auto& slot : plan.state)
      if (slot.name.ends_with("running_var"))
        for (int64_t i = 0; i < slot.size(); ++i) state[slot.offset + i] = 1.0f;
  return state;
}

std::string Model::summary() const {
  const bool graph = !is_chain();
  int width = 18;  // the name column grows for long names ("layer1.0.downsample.0")
  for (const auto& plan : plans_) width = std::max(width, static_cast<int>(plan.name.size()));
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-*s %-16s %10s%s\n", width, "Layer", "Output shape", "Params",
                graph ? "   Inputs" : "");
  out += line;
  const std::string rule((graph ? 70 : 46) + width - 18, '-');
  out += rule + "\n";
  for (const auto& plan : plans_) {
    int64_t count = 0;
    for (const auto& p : plan.params) count += p.size();
    std::string from;
    for (int in : plan.inputs) from += (from.empty() ? "" : ", ") + (in == kModelInput ? "input" : plans_[in].name);
    if (from.size() > 200) from = from.substr(0, 197) + "...";
    std::snprintf(line, sizeof line, "%-*s %-16s %10lld%s%s%s\n", width, plan.name.c_str(),
                  to_string(plan.output_shape).c_str(), static_cast<long long>(count), graph ? "   " : "",
                  graph ? from.c_str() : "", plan.trainable ? "" : "   (frozen)");
    out += line;
  }
  out += rule + "\n";
  std::snprintf(line, sizeof line, "Total params: %lld (input %s)\n", static_cast<long long>(num_params_),
                to_string(input_shape_).c_str());
  return out + line;
}

LayerFlops layer_flops(const LayerPlan& plan) {
  const auto in = static_cast<double>(numel(plan.input_shape));
  const auto out = static_cast<double>(numel(plan.output_shape));
  if (std::holds_alternative<Conv2d>(plan.layer) || std::holds_alternative<Dense>(plan.layer)) {
    // Each output sums (weights per output unit) products; backward does it twice.
    const auto& w = plan.params[0];
    const double per_output = static_cast<double>(w.size() / w.shape[0]);
    const double f = 2 * out * per_output;
    return {f, 2 * f};
  }
  if (auto* p = std::get_if<MaxPool2d>(&plan.layer)) return {out * static_cast<double>(p->kernel * p->kernel), in};
  if (auto* p = std::get_if<AvgPool2d>(&plan.layer))
    return {out * static_cast<double>(p->kernel * p->kernel), out * static_cast<double>(p->kernel * p->kernel)};
  if (std::holds_alternative<BatchNorm>(plan.layer)) return {4 * in, 8 * in};
  if (std::holds_alternative<GlobalAvgPool>(plan.layer) || std::holds_alternative<Dropout>(plan.layer) ||
      std::holds_alternative<ReLU>(plan.layer) || std::holds_alternative<ReLU6>(plan.layer) ||
      std::holds_alternative<Clip>(plan.layer))
    return {in, in};
  if (std::holds_alternative<Affine>(plan.layer)) return {2 * in, 3 * in};
  if (std::holds_alternative<SiLU>(plan.layer) || std::holds_alternative<Sigmoid>(plan.layer)) return {4 * in, 4 * in};
  if (std::holds_alternative<Multiply>(plan.layer)) return {out, 3 * out};
  if (std::holds_alternative<LogSoftmax>(plan.layer)) return {4 * in, 4 * in};
  if (std::holds_alternative<Add>(plan.layer)) return {out * static_cast<double>(plan.inputs.size() - 1), 0};
  return {};
}

Model seed_cnn() {
  return Model({1, 28, 28}, {
                                      Conv2d{.filters = 10, .kernel = 5},
                                      MaxPool2d{.kernel = 2},
                                      ReLU{},
                                      BatchNorm{},
                                      Conv2d{.filters = 20, .kernel = 5},
                                      MaxPool2d{.kernel = 2},
                                      ReLU{},
                                      BatchNorm{},
                                      Flatten{},
                                      Dense{.units = 50},
                                      ReLU{},
                                      Dense{.units = 10},
                                      LogSoftmax{},
                                  });
}

}  // namespace convoy::nn
