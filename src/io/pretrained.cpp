#include "convoy/io/pretrained.h"

#include <algorithm>
#include <set>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::io {
namespace {

bool skipped(const std::string& name, const PretrainedOptions& o) {
  return std::any_of(o.skip_prefixes.begin(), o.skip_prefixes.end(),
                     [&](const std::string& p) { return name.starts_with(p); });
}

}  // namespace

int load_pytorch_weights(const nn::Model& model, const std::string& path, FlatWeights& into,
                         const PretrainedOptions& options) {
  require(static_cast<int64_t>(into.params.size()) == model.num_parameters() &&
              static_cast<int64_t>(into.state.size()) == model.num_state(),
          "load_pytorch_weights: the buffers do not fit the model");
  // PyTorch's BN step counters are int64 and mean nothing to convoy.
  const NamedTensors file = read_safetensors(path, nullptr, [&](const std::string& name) {
    return name.ends_with(".num_batches_tracked") || skipped(name, options);
  });
  std::set<std::string> used;
  int loaded = 0;
  auto load = [&](const nn::ParamSlot& slot, std::vector<float>& buffer) {
    if (skipped(slot.name, options)) return;
    auto it = file.find(slot.name);
    require(it != file.end(), path + ": no tensor '" + slot.name +
                                  "', which the model needs; is this a state dict of the same architecture?");
    const Tensor& t = it->second;
    require(t.dtype() == DType::f32, path + ": tensor '" + slot.name + "' is " + dtype_name(t.dtype()) +
                                         "; save the state dict in float32");
    require(t.shape() == slot.shape, path + ": tensor '" + slot.name + "' has shape " + to_string(t.shape()) +
                                         ", the model needs " + to_string(slot.shape) +
                                         " (a different head? skip it and train a new one)");
    const auto src = t.data<float>();
    require_finite_weights(src, path, slot.name);
    std::copy(src.begin(), src.end(), buffer.begin() + slot.offset);
    used.insert(slot.name);
    ++loaded;
  };
  for (const auto& plan : model.layers()) {
    for (const auto& slot : plan.params) load(slot, into.params);
    for (const auto& slot : plan.state) load(slot, into.state);
  }
  if (!options.allow_unused)
    for (const auto& [name, t] : file)
      require(used.count(name) > 0, path + ": tensor '" + shown(name) +
                                        "' matches no tensor of the model; is this a state dict of the same "
                                        "architecture?");
  return loaded;
}

}  // namespace convoy::io
