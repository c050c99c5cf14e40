#include "backends/graph_plan.h"

#include <stdexcept>

namespace convoy {

GraphPlan plan_graph(const nn::Model& model, int64_t batch, bool input_gradient, const std::vector<bool>& views,
                     int64_t align_floats) {
  const auto& layers = model.layers();
  if (views.size() != layers.size()) throw std::logic_error("plan_graph: one view flag per layer expected");
  const std::size_t count = layers.size() + 1;
  auto aligned = [&](int64_t floats) { return (floats + align_floats - 1) / align_floats * align_floats; };

  GraphPlan p;
  p.activation.assign(count, -1);
  p.gradient.assign(count, -1);
  p.elements.resize(count);
  p.input_gradient.resize(layers.size());
  p.sums.resize(count);
  p.elements[0] = batch * numel(model.input_shape());
  for (std::size_t i = 0; i < layers.size(); ++i) p.elements[i + 1] = batch * numel(layers[i].output_shape);
  std::vector<int> uses(count, 0);
  for (const auto& plan : layers)
    for (int in : plan.inputs) ++uses[in + 1];

  int64_t cursor = 0;
  auto take = [&](int64_t floats) {
    const int64_t at = cursor;
    cursor += aligned(floats);
    return at;
  };
  p.activation[0] = take(p.elements[0]);
  if (input_gradient) p.gradient[0] = take(p.elements[0]);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    for (int in : layers[i].inputs) {
      const int a = in + 1;
      int64_t d = p.gradient[a];
      if (uses[a] > 1 && d >= 0) {  // a gradient of its own, summed later
        d = take(p.elements[a]);
        GradientSum& sum = p.sums[a];
        sum.into = p.gradient[a];
        sum.elements = p.elements[a];
        sum.parts.push_back(d);
      }
      p.input_gradient[i].push_back(d);
    }
    if (views[i]) {
      p.activation[i + 1] = p.activation[layers[i].inputs[0] + 1];
      p.gradient[i + 1] = p.input_gradient[i][0];
      continue;
    }
    // The output, then its gradient, side by side.
    p.activation[i + 1] = take(p.elements[i + 1]);
    p.gradient[i + 1] = take(p.elements[i + 1]);
  }
  p.floats = cursor;
  return p;
}

}  // namespace convoy
