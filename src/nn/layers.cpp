#include "convoy/nn/layers.h"

#include "convoy/core/error.h"

namespace convoy::nn {
namespace {

template <class... Ts> struct Overloaded : Ts... { using Ts::operator()...; };
template <class... Ts> Overloaded(Ts...) -> Overloaded<Ts...>;

void need_rank(const Shape& in, std::size_t rank, const std::string& name, const char* what) {
  require(in.size() == rank, name + ": expects " + what + " input, got shape " + to_string(in) +
                                 "; check the layers before it");
}

int64_t window_out(int64_t size, int64_t kernel, int64_t stride, int64_t pad, const std::string& name) {
  require(kernel > 0 && stride > 0 && pad >= 0,
          name + ": kernel and stride must be positive and padding non-negative");
  int64_t out = (size + 2 * pad - kernel) / stride + 1;
  require(size + 2 * pad >= kernel && out > 0,
          name + ": kernel " + std::to_string(kernel) + " does not fit input size " + std::to_string(size));
  return out;
}

}  // namespace

const char* kind_name(const Layer& layer) {
  return std::visit(Overloaded{
                        [](const Conv2d&) { return "conv2d"; },
                        [](const MaxPool2d&) { return "max_pool2d"; },
                        [](const ReLU&) { return "relu"; },
                        [](const BatchNorm&) { return "batch_norm"; },
                        [](const Flatten&) { return "flatten"; },
                        [](const Dense&) { return "dense"; },
                        [](const LogSoftmax&) { return "log_softmax"; },
                        [](const Add&) { return "add"; },
                        [](const Concat&) { return "concat"; },
                    },
                    layer);
}

Shape output_shape(const Layer& layer, const Shape& in, const std::string& name) {
  return std::visit(
      Overloaded{
          [&](const Conv2d& c) -> Shape {
            need_rank(in, 3, name, "a [C, H, W]");
            require(c.filters > 0, name + ": filters must be positive");
            return {c.filters, window_out(in[1], c.kernel, c.stride, c.padding, name),
                    window_out(in[2], c.kernel, c.stride, c.padding, name)};
          },
          [&](const MaxPool2d& p) -> Shape {
            need_rank(in, 3, name, "a [C, H, W]");
            int64_t stride = p.stride ? p.stride : p.kernel;
            return {in[0], window_out(in[1], p.kernel, stride, 0, name),
                    window_out(in[2], p.kernel, stride, 0, name)};
          },
          [&](const ReLU&) -> Shape { return in; },
          [&](const BatchNorm&) -> Shape {
            require(in.size() == 1 || in.size() == 3,
                    name + ": expects a [C, H, W] or [features] input, got " + to_string(in));
            return in;
          },
          [&](const Flatten&) -> Shape { return {numel(in)}; },
          [&](const Dense& d) -> Shape {
            need_rank(in, 1, name, "a [features]");
            require(d.units > 0, name + ": units must be positive");
            return {d.units};
          },
          [&](const LogSoftmax&) -> Shape {
            need_rank(in, 1, name, "a [features]");
            return in;
          },
          [&](const auto&) -> Shape { return output_shape(layer, std::vector<Shape>{in}, name); },
      },
      layer);
}

int arity(const Layer& layer) {
  return std::holds_alternative<Add>(layer) || std::holds_alternative<Concat>(layer) ? kManyInputs : 1;
}

Shape output_shape(const Layer& layer, const std::vector<Shape>& inputs, const std::string& name) {
  if (arity(layer) == 1) {
    require(inputs.size() == 1, name + ": takes one input, got " + std::to_string(inputs.size()));
    return output_shape(layer, inputs[0], name);
  }
  require(inputs.size() >= 2, name + ": joins two or more inputs, got " + std::to_string(inputs.size()));
  auto shapes = [&] {
    std::string all;
    for (const auto& s : inputs) all += (all.empty() ? "" : ", ") + to_string(s);
    return all;
  };
  if (std::holds_alternative<Add>(layer)) {
    for (const auto& s : inputs)
      require(s == inputs[0], name + ": adds inputs of one shape, got " + shapes() + "; project the shortcut first");
    return inputs[0];
  }
  Shape out = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const Shape& s = inputs[i];
    require(s.size() == out.size() && std::equal(s.begin() + 1, s.end(), out.begin() + 1),
            name + ": concatenates along channels; the other dimensions must agree, got " + shapes());
    out[0] += s[0];
  }
  return out;
}

}  // namespace convoy::nn
