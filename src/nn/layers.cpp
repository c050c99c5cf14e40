#include "convoy/nn/layers.h"

#include <algorithm>
#include <cmath>

#include "convoy/core/error.h"

namespace convoy::nn {
namespace {

template <class... Ts> struct Overloaded : Ts... { using Ts::operator()...; };
template <class... Ts> Overloaded(Ts...) -> Overloaded<Ts...>;

void need_rank(const Shape& in, std::size_t rank, const std::string& name, const char* what) {
  require(in.size() == rank, name + ": expects " + what + " input, got shape " + to_string(in) +
                                 "; check the layers before it");
}

// Pooling: the window sizes of both axes; padding up to half the kernel, so
// that every window holds at least one pixel of the image.
Shape pooled(const Shape& in, int64_t kernel, int64_t stride, int64_t padding, const std::string& name) {
  need_rank(in, 3, name, "a [C, H, W]");
  stride = stride ? stride : kernel;
  require(padding == kSame || padding <= kernel / 2,
          name + ": padding " + std::to_string(padding) + " is more than half the kernel " + std::to_string(kernel) +
              "; use a padding of at most " + std::to_string(kernel / 2));
  return {in[0], window(in[1], kernel, stride, padding, name).out, window(in[2], kernel, stride, padding, name).out};
}

}  // namespace

Window window(int64_t size, int64_t kernel, int64_t stride, int64_t padding, const std::string& name) {
  // Bounded so that no window arithmetic below (size + 2 * padding) can overflow.
  require(kernel > 0 && stride > 0 && (padding >= 0 || padding == kSame) && kernel <= kMaxValuesPerExample &&
              stride <= kMaxValuesPerExample && padding <= kMaxValuesPerExample,
          name + ": kernel " + std::to_string(kernel) + ", stride " + std::to_string(stride) + ", padding " +
              (padding == kSame ? std::string("\"same\"") : std::to_string(padding)) +
              ": kernel and stride must be positive, padding non-negative (or \"same\"), each at most 2^31");
  if (padding == kSame) {
    const int64_t out = (size + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((out - 1) * stride + kernel - size, 0);
    return {out, total / 2, total - total / 2};
  }
  require(size + 2 * padding >= kernel, name + ": kernel " + std::to_string(kernel) + " does not fit input size " +
                                            std::to_string(size) + " with padding " + std::to_string(padding) +
                                            "; use a smaller kernel, more padding (or \"same\"), fewer pools or strides "
                                            "before it, or larger images");
  return {(size + 2 * padding - kernel) / stride + 1, padding, padding};
}

const char* kind_name(const Layer& layer) {
  return std::visit(Overloaded{
                        [](const Conv2d&) { return "conv2d"; },
                        [](const MaxPool2d&) { return "max_pool2d"; },
                        [](const AvgPool2d&) { return "avg_pool2d"; },
                        [](const GlobalAvgPool&) { return "global_avg_pool"; },
                        [](const Dropout&) { return "dropout"; },
                        [](const ReLU&) { return "relu"; },
                        [](const ReLU6&) { return "relu6"; },
                        [](const SiLU&) { return "silu"; },
                        [](const Sigmoid&) { return "sigmoid"; },
                        [](const BatchNorm&) { return "batch_norm"; },
                        [](const Flatten&) { return "flatten"; },
                        [](const Dense&) { return "dense"; },
                        [](const LogSoftmax&) { return "log_softmax"; },
                        [](const Add&) { return "add"; },
                        [](const Concat&) { return "concat"; },
                        [](const Multiply&) { return "multiply"; },
                        [](const Clip&) { return "clip"; },
                        [](const Affine&) { return "affine"; },
                    },
                    layer);
}

Shape output_shape(const Layer& layer, const Shape& in, const std::string& name) {
  return std::visit(
      Overloaded{
          [&](const Conv2d& c) -> Shape {
            need_rank(in, 3, name, "a [C, H, W]");
            require(c.filters > 0, name + ": filters must be positive");
            require(c.groups > 0 && in[0] % c.groups == 0 && c.filters % c.groups == 0,
                    name + ": groups (" + std::to_string(c.groups) + ") must divide the input channels (" +
                        std::to_string(in[0]) + ") and the filters (" + std::to_string(c.filters) + ")");
            return {c.filters, window(in[1], c.kernel, c.stride, c.padding, name).out,
                    window(in[2], c.kernel, c.stride, c.padding, name).out};
          },
          [&](const MaxPool2d& p) {
            // Refused here, where every model is built (summary, export, every
            // backend), not only when the CPU backend compiles its kernels.
            require(p.kernel <= kMaxPoolLargestKernel,
                    name + ": kernel " + std::to_string(p.kernel) + " is above " +
                        std::to_string(kMaxPoolLargestKernel) + ", the largest max-pool window convoy runs; use a kernel "
                        "of at most " + std::to_string(kMaxPoolLargestKernel) + ", several pools, or a global_avg_pool");
            return pooled(in, p.kernel, p.stride, p.padding, name);
          },
          [&](const AvgPool2d& p) { return pooled(in, p.kernel, p.stride, p.padding, name); },
          [&](const GlobalAvgPool& g) -> Shape {
            need_rank(in, 3, name, "a [C, H, W]");
            return g.keep_dims ? Shape{in[0], 1, 1} : Shape{in[0]};
          },
          [&](const Dropout& d) -> Shape {
            require(d.rate >= 0 && d.rate < 1, name + ": rate must be in [0, 1), got " + std::to_string(d.rate));
            return in;
          },
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
          [&](const Add&) -> Shape { return output_shape(layer, std::vector<Shape>{in}, name); },
          [&](const Concat&) -> Shape { return output_shape(layer, std::vector<Shape>{in}, name); },
          [&](const Multiply&) -> Shape { return output_shape(layer, std::vector<Shape>{in}, name); },
          [&](const Clip& c) -> Shape {
            require(!(c.min > c.max) && !std::isnan(c.min) && !std::isnan(c.max),
                    name + ": min " + std::to_string(c.min) + " is above max " + std::to_string(c.max) +
                        " (or one is NaN); give min <= max");
            return in;
          },
          [&](const auto&) -> Shape { return in; },  // element-wise activations
      },
      layer);
}

int arity(const Layer& layer) {
  if (std::holds_alternative<Multiply>(layer)) return 2;
  return std::holds_alternative<Add>(layer) || std::holds_alternative<Concat>(layer) ? kManyInputs : 1;
}

Shape output_shape(const Layer& layer, const std::vector<Shape>& inputs, const std::string& name) {
  const int want = arity(layer);
  if (want == 1) {
    require(inputs.size() == 1, name + ": takes one input, got " + std::to_string(inputs.size()));
    return output_shape(layer, inputs[0], name);
  }
  auto shapes = [&] {
    std::string all;
    for (const auto& s : inputs) all += (all.empty() ? "" : ", ") + to_string(s);
    return all;
  };
  if (want == 2) {
    require(inputs.size() == 2, name + ": takes two inputs (x and a gate), got " + std::to_string(inputs.size()));
    const Shape &x = inputs[0], &g = inputs[1];
    const bool per_channel = x.size() == 3 && (g == Shape{x[0]} || g == Shape{x[0], 1, 1});
    require(g == x || per_channel,
            name + ": multiplies x by a gate of its shape or one value per channel, got " + shapes());
    return x;
  }
  require(inputs.size() >= 2, name + ": joins two or more inputs, got " + std::to_string(inputs.size()));
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
