#include "convoy/io/model_weights.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::io {
namespace {

template <class Fn> void for_each_slot(const nn::Model& model, Fn fn) {
  for (const auto& plan : model.layers()) {
    for (const auto& slot : plan.params) fn(slot, false);
    for (const auto& slot : plan.state) fn(slot, true);
  }
}

}  // namespace

NamedTensors to_named(const nn::Model& model, std::span<const float> params, std::span<const float> state) {
  NamedTensors out;
  for_each_slot(model, [&](const nn::ParamSlot& slot, bool is_state) {
    Tensor t(DType::f32, slot.shape);
    auto src = (is_state ? state : params).subspan(slot.offset, slot.size());
    std::copy(src.begin(), src.end(), t.data<float>().begin());
    out.emplace(slot.name, std::move(t));
  });
  return out;
}

FlatWeights from_named(const nn::Model& model, const NamedTensors& named, const std::string& what) {
  // Every tensor is found and checked before the buffers are allocated: the
  // model may come from a config in the same file (a checkpoint), and only
  // tensors the file really holds may size what is allocated.
  for_each_slot(model, [&](const nn::ParamSlot& slot, bool) {
    auto it = named.find(slot.name);
    require(it != named.end(), what + ": no tensor '" + slot.name + "' for this model; the file is corrupt or holds another model's weights");
    require(it->second.dtype() == DType::f32 && it->second.shape() == slot.shape,
            what + ": tensor '" + slot.name + "' has shape " + to_string(it->second.shape()) + ", the model needs " +
                to_string(slot.shape));
    require_finite_weights(it->second.data<float>(), what, slot.name);
  });
  FlatWeights w{std::vector<float>(model.num_parameters()), std::vector<float>(model.num_state())};
  for_each_slot(model, [&](const nn::ParamSlot& slot, bool is_state) {
    const auto src = named.at(slot.name).data<float>();
    std::copy(src.begin(), src.end(), (is_state ? w.state : w.params).begin() + slot.offset);
  });
  return w;
}

void require_finite_weights(std::span<const float> values, const std::string& what, const std::string& tensor) {
  const auto bad = std::find_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
  if (bad == values.end()) return;
  throw UserError(what + ": tensor '" + shown(tensor) + "' holds " + (std::isnan(*bad) ? "NaN" : "an infinite value") +
                  " (value " + std::to_string(bad - values.begin()) + " of " + std::to_string(values.size()) +
                  "); a model with it trains to nothing; use weights saved from a run that did not diverge");
}

}  // namespace convoy::io
