#include "convoy/nn/sequential.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "convoy/core/error.h"
#include "convoy/core/rng.h"

namespace convoy::nn {
namespace {

// Learned tensors of one layer, in PyTorch's order and layouts
// (conv weight [O, I, kh, kw], dense weight [O, I]).
std::vector<ParamSlot> learned_slots(const Layer& layer, const Shape& in) {
  if (auto* c = std::get_if<Conv2d>(&layer))
    return {{"weight", {c->filters, in[0], c->kernel, c->kernel}}, {"bias", {c->filters}}};
  if (auto* d = std::get_if<Dense>(&layer)) return {{"weight", {d->units, in[0]}}, {"bias", {d->units}}};
  if (std::holds_alternative<BatchNorm>(layer)) return {{"weight", {in[0]}}, {"bias", {in[0]}}};
  return {};
}

std::vector<ParamSlot> state_slots(const Layer& layer, const Shape& in) {
  if (std::holds_alternative<BatchNorm>(layer)) return {{"running_mean", {in[0]}}, {"running_var", {in[0]}}};
  return {};
}

void place(std::vector<ParamSlot>& slots, const std::string& layer_name, int64_t& cursor) {
  for (auto& s : slots) {
    s.name = layer_name + "." + s.name;
    s.offset = cursor;
    cursor += s.size();
  }
}

}  // namespace

Sequential::Sequential(Shape input_shape, std::vector<Layer> layers) : input_shape_(std::move(input_shape)) {
  require(!layers.empty(), "model: a Sequential model needs at least one layer");
  std::map<std::string, int> counts;
  Shape shape = input_shape_;
  for (auto& layer : layers) {
    std::string kind = kind_name(layer);
    std::string name = kind + "_" + std::to_string(counts[kind]++);
    LayerPlan plan{name, layer, shape, nn::output_shape(layer, shape, name), learned_slots(layer, shape),
                   state_slots(layer, shape)};
    place(plan.params, name, num_params_);
    place(plan.state, name, num_state_);
    shape = plan.output_shape;
    plans_.push_back(std::move(plan));
  }
}

const Shape& Sequential::output_shape() const { return plans_.back().output_shape; }

std::vector<float> Sequential::initial_parameters(uint64_t seed) const {
  std::vector<float> params(num_params_);
  Rng rng(seed);
  for (const auto& plan : plans_) {
    if (std::holds_alternative<BatchNorm>(plan.layer)) {
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

std::vector<float> Sequential::initial_state() const {
  std::vector<float> state(num_state_);
  for (const auto& plan : plans_)
    for (const auto& slot : plan.state)
      if (slot.name.ends_with("running_var"))
        for (int64_t i = 0; i < slot.size(); ++i) state[slot.offset + i] = 1.0f;
  return state;
}

std::string Sequential::summary() const {
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%-18s %-16s %10s\n", "Layer", "Output shape", "Params");
  out += line;
  out += std::string(46, '-') + "\n";
  for (const auto& plan : plans_) {
    int64_t count = 0;
    for (const auto& p : plan.params) count += p.size();
    std::snprintf(line, sizeof line, "%-18s %-16s %10lld\n", plan.name.c_str(),
                  to_string(plan.output_shape).c_str(), static_cast<long long>(count));
    out += line;
  }
  out += std::string(46, '-') + "\n";
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
  if (std::holds_alternative<BatchNorm>(plan.layer)) return {4 * in, 8 * in};
  if (std::holds_alternative<ReLU>(plan.layer)) return {in, in};
  if (std::holds_alternative<LogSoftmax>(plan.layer)) return {4 * in, 4 * in};
  return {};
}

Sequential seed_cnn() {
  return Sequential({1, 28, 28}, {
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
