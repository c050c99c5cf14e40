#include "convoy/io/model_weights.h"

#include <algorithm>

#include "convoy/core/error.h"

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
  FlatWeights w{std::vector<float>(model.num_parameters()), std::vector<float>(model.num_state())};
  for_each_slot(model, [&](const nn::ParamSlot& slot, bool is_state) {
    auto it = named.find(slot.name);
    require(it != named.end(), what + ": no tensor '" + slot.name + "' for this model");
    require(it->second.dtype() == DType::f32 && it->second.shape() == slot.shape,
            what + ": tensor '" + slot.name + "' has shape " + to_string(it->second.shape()) + ", the model needs " +
                to_string(slot.shape));
    auto src = it->second.data<float>();
    std::copy(src.begin(), src.end(), (is_state ? w.state : w.params).begin() + slot.offset);
  });
  return w;
}

}  // namespace convoy::io
