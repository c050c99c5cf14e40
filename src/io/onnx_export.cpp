// A model's inference graph as ONNX (see onnx.h). Each layer becomes one or
// a few nodes; its output tensor is named after the layer, its weights after
// its parameters ("layer1.0.conv1.weight"), so an import gets the same names.
#include <cmath>
#include <variant>

#include "convoy/core/error.h"
#include "convoy/io/atomic_file.h"
#include "convoy/io/onnx.h"

namespace convoy::io {
namespace {

using onnx::Attribute;
using onnx::Node;

template <class... Ts> struct Overloaded : Ts... { using Ts::operator()...; };
template <class... Ts> Overloaded(Ts...) -> Overloaded<Ts...>;

Attribute int_attr(const std::string& name, int64_t v) { return {.name = name, .type = Attribute::kInt, .i = v}; }
Attribute float_attr(const std::string& name, float v) { return {.name = name, .type = Attribute::kFloatAttr, .f = v}; }
Attribute ints_attr(const std::string& name, std::vector<int64_t> v) {
  return {.name = name, .type = Attribute::kInts, .ints = std::move(v)};
}

class Exporter {
 public:
  Exporter(const nn::Model& model, std::span<const float> params, std::span<const float> state,
           const OnnxExportOptions& options)
      : model_(model), params_(params), state_(state), options_(options) {}

  onnx::Model run() {
    const auto& plans = model_.layers();
    names_.resize(plans.size());
    std::vector<int> consumers(plans.size(), 0);
    for (const auto& p : plans)
      for (int i : p.inputs)
        if (i != nn::kModelInput) ++consumers[static_cast<std::size_t>(i)];
    std::vector<bool> folded(plans.size(), false);
    for (std::size_t i = 0; i < plans.size(); ++i) {
      const nn::LayerPlan& p = plans[i];
      if (folded[i]) continue;
      // A batch norm whose input is a convolution feeding nothing else folds into it.
      int bn = -1;
      if (options_.fold_batch_norm && std::holds_alternative<nn::Conv2d>(p.layer) && consumers[i] == 1)
        for (std::size_t j = i + 1; j < plans.size(); ++j)
          if (std::holds_alternative<nn::BatchNorm>(plans[j].layer) && plans[j].inputs == std::vector<int>{int(i)}) {
            bn = static_cast<int>(j);
            break;
          }
      if (bn >= 0) {
        folded[static_cast<std::size_t>(bn)] = true;
        names_[static_cast<std::size_t>(bn)] = names_[i] = plans[static_cast<std::size_t>(bn)].name;
        conv(p, &plans[static_cast<std::size_t>(bn)], names_[i]);
      } else {
        layer(i, p);
      }
    }
    const std::string& last = names_.back();
    // The output must be some node's output under the name "output".
    for (Node& n : out_.graph.nodes)
      for (auto& o : n.outputs)
        if (o == last) o = "output";
    for (Node& n : out_.graph.nodes)
      for (auto& in : n.inputs)
        if (in == last) in = "output";
    // Only dropouts (the identity in inference) leave nothing to compute the
    // output: the last stays a Dropout node, which imports back as a layer
    // (an Identity would import as a model without layers, which convoy lacks).
    if (last == "input")
      node("Dropout", "output", {"input", initializer("output.ratio", {}, {std::get<nn::Dropout>(plans.back().layer).rate})},
           "output");
    Shape in = model_.input_shape();
    onnx::ValueInfo input{.name = "input", .dims = {-1}, .dim_params = {"N"}};
    for (int64_t d : in) input.dims.push_back(d), input.dim_params.emplace_back();
    onnx::ValueInfo output{.name = "output", .dims = {-1}, .dim_params = {"N"}};
    for (int64_t d : model_.output_shape()) output.dims.push_back(d), output.dim_params.emplace_back();
    out_.graph.name = "convoy";
    out_.graph.inputs = {input};
    out_.graph.outputs = {output};
    return std::move(out_);
  }

 private:
  std::span<const float> tensor(std::span<const float> flat, const nn::ParamSlot& s) const {
    return flat.subspan(static_cast<std::size_t>(s.offset), static_cast<std::size_t>(s.size()));
  }
  std::string initializer(const std::string& name, Shape dims, std::vector<float> values) {
    out_.graph.initializers.push_back({.name = name, .data_type = onnx::kFloat, .dims = std::move(dims), .floats = std::move(values)});
    return name;
  }
  std::string input_name(int i) const { return i == nn::kModelInput ? "input" : names_[static_cast<std::size_t>(i)]; }
  void node(const std::string& op, const std::string& name, std::vector<std::string> inputs, const std::string& output,
            std::vector<Attribute> attributes = {}) {
    out_.graph.nodes.push_back(
        {.name = name, .op_type = op, .inputs = std::move(inputs), .outputs = {output}, .attributes = std::move(attributes)});
  }
  // kernel_shape, strides and pads of a square window over [C, H, W].
  std::vector<Attribute> window_attrs(const nn::LayerPlan& p, int64_t kernel, int64_t stride, int64_t padding) const {
    const nn::Window h = nn::window(p.input_shape[1], kernel, stride, padding, p.name);
    const nn::Window w = nn::window(p.input_shape[2], kernel, stride, padding, p.name);
    return {ints_attr("kernel_shape", {kernel, kernel}), ints_attr("strides", {stride, stride}),
            ints_attr("pads", {h.pad_begin, w.pad_begin, h.pad_end, w.pad_end})};
  }

  // A convolution, with the batch norm after it folded in when `bn` is given:
  // w' = w * g / sqrt(v + eps) per output channel, b' = (b - m) * g / sqrt(v + eps) + beta.
  void conv(const nn::LayerPlan& p, const nn::LayerPlan* bn, const std::string& output) {
    const auto& c = std::get<nn::Conv2d>(p.layer);
    const auto w = tensor(params_, p.params[0]);
    std::vector<float> weight(w.begin(), w.end()), bias(static_cast<std::size_t>(c.filters), 0.0f);
    if (c.bias) {
      const auto b = tensor(params_, p.params[1]);
      bias.assign(b.begin(), b.end());
    }
    if (bn) {
      const float eps = std::get<nn::BatchNorm>(bn->layer).eps;
      const auto g = tensor(params_, bn->params[0]), beta = tensor(params_, bn->params[1]);
      const auto mean = tensor(state_, bn->state[0]), var = tensor(state_, bn->state[1]);
      const std::size_t per = weight.size() / static_cast<std::size_t>(c.filters);
      for (std::size_t o = 0; o < static_cast<std::size_t>(c.filters); ++o) {
        const float scale = g[o] / std::sqrt(var[o] + eps);
        for (std::size_t k = 0; k < per; ++k) weight[o * per + k] *= scale;
        bias[o] = (bias[o] - mean[o]) * scale + beta[o];
      }
    }
    std::vector<std::string> inputs{input_name(p.inputs[0]), initializer(p.name + ".weight", p.params[0].shape, weight)};
    if (c.bias || bn) inputs.push_back(initializer(p.name + ".bias", {c.filters}, bias));
    auto attrs = window_attrs(p, c.kernel, c.stride, c.padding);
    attrs.push_back(ints_attr("dilations", {1, 1}));
    attrs.push_back(int_attr("group", c.groups));
    node("Conv", p.name, inputs, output, attrs);
  }

  std::vector<float> copy(std::span<const float> flat, const nn::ParamSlot& s) const {
    const auto t = tensor(flat, s);
    return {t.begin(), t.end()};
  }

  void layer(std::size_t i, const nn::LayerPlan& p) {
    const std::string& n = names_[i] = p.name;
    const std::string x = input_name(p.inputs[0]);
    std::visit(
        Overloaded{
            [&](const nn::Conv2d&) { conv(p, nullptr, n); },
            [&](const nn::MaxPool2d& m) {
              node("MaxPool", n, {x}, n, window_attrs(p, m.kernel, m.stride ? m.stride : m.kernel, m.padding));
            },
            [&](const nn::AvgPool2d& a) {
              auto attrs = window_attrs(p, a.kernel, a.stride ? a.stride : a.kernel, a.padding);
              attrs.push_back(int_attr("count_include_pad", a.count_include_pad ? 1 : 0));
              node("AveragePool", n, {x}, n, attrs);
            },
            [&](const nn::GlobalAvgPool& g) {
              if (g.keep_dims) return node("GlobalAveragePool", n, {x}, n);
              node("GlobalAveragePool", n + ".pool", {x}, n + ".pool");
              node("Flatten", n, {n + ".pool"}, n, {int_attr("axis", 1)});
            },
            [&](const nn::Dropout&) { names_[i] = x; },  // inference: the identity
            [&](const nn::ReLU&) { node("Relu", n, {x}, n); },
            [&](const nn::ReLU6&) {
              node("Clip", n, {x, initializer(n + ".min", {}, {0.0f}), initializer(n + ".max", {}, {6.0f})}, n);
            },
            [&](const nn::SiLU&) {
              node("Sigmoid", n + ".sigmoid", {x}, n + ".sigmoid");
              node("Mul", n, {x, n + ".sigmoid"}, n);
            },
            [&](const nn::Sigmoid&) { node("Sigmoid", n, {x}, n); },
            [&](const nn::Clip& c) {  // an infinite bound is an absent input
              std::vector<std::string> ins{x};
              if (!std::isinf(c.min) || !std::isinf(c.max))
                ins.push_back(std::isinf(c.min) ? "" : initializer(n + ".min", {}, {c.min}));
              if (!std::isinf(c.max)) ins.push_back(initializer(n + ".max", {}, {c.max}));
              node("Clip", n, ins, n);
            },
            [&](const nn::Affine&) {  // x * weight + bias, both [1, ...] of one example's shape
              Shape dims{1};
              dims.insert(dims.end(), p.input_shape.begin(), p.input_shape.end());
              node("Mul", n + ".scaled", {x, initializer(p.params[0].name, dims, copy(params_, p.params[0]))}, n + ".scaled");
              node("Add", n, {n + ".scaled", initializer(p.params[1].name, dims, copy(params_, p.params[1]))}, n);
            },
            [&](const nn::BatchNorm& b) {
              node("BatchNormalization", n,
                   {x, initializer(p.params[0].name, p.params[0].shape, copy(params_, p.params[0])),
                    initializer(p.params[1].name, p.params[1].shape, copy(params_, p.params[1])),
                    initializer(p.state[0].name, p.state[0].shape, copy(state_, p.state[0])),
                    initializer(p.state[1].name, p.state[1].shape, copy(state_, p.state[1]))},
                   n, {float_attr("epsilon", b.eps), float_attr("momentum", 1.0f - b.momentum)});
            },
            [&](const nn::Flatten&) { node("Flatten", n, {x}, n, {int_attr("axis", 1)}); },
            [&](const nn::Dense&) {
              node("Gemm", n,
                   {x, initializer(p.params[0].name, p.params[0].shape, copy(params_, p.params[0])),
                    initializer(p.params[1].name, p.params[1].shape, copy(params_, p.params[1]))},
                   n, {int_attr("transB", 1)});
            },
            [&](const nn::LogSoftmax&) { node("LogSoftmax", n, {x}, n, {int_attr("axis", 1)}); },
            [&](const nn::Add&) {
              std::string sum = x;
              for (std::size_t k = 1; k < p.inputs.size(); ++k) {
                const std::string out = k + 1 == p.inputs.size() ? n : n + "." + std::to_string(k);
                node("Add", out, {sum, input_name(p.inputs[k])}, out);
                sum = out;
              }
            },
            [&](const nn::Concat&) {
              std::vector<std::string> ins;
              for (int k : p.inputs) ins.push_back(input_name(k));
              node("Concat", n, ins, n, {int_attr("axis", 1)});
            },
            [&](const nn::Multiply&) {
              std::string gate = input_name(p.inputs[1]);
              // A per-channel gate [C] on an image broadcasts as [C, 1, 1].
              if (p.input_shapes[0].size() == 3 && p.input_shapes[1].size() == 1) {
                out_.graph.initializers.push_back({.name = n + ".axes", .data_type = onnx::kInt64, .dims = {2}, .int64s = {2, 3}});
                node("Unsqueeze", n + ".gate", {gate, n + ".axes"}, n + ".gate");
                gate = n + ".gate";
              }
              node("Mul", n, {x, gate}, n);
            },
        },
        p.layer);
  }

  const nn::Model& model_;
  std::span<const float> params_, state_;
  OnnxExportOptions options_;
  std::vector<std::string> names_;  // each layer's output tensor
  onnx::Model out_;
};

}  // namespace

onnx::Model to_onnx(const nn::Model& model, std::span<const float> params, std::span<const float> state,
                    const OnnxExportOptions& options) {
  require(static_cast<int64_t>(params.size()) == model.num_parameters() &&
              static_cast<int64_t>(state.size()) == model.num_state(),
          "ONNX export: the weights do not belong to this model");
  return Exporter(model, params, state, options).run();
}

void export_onnx(const std::string& path, const nn::Model& model, std::span<const float> params,
                 std::span<const float> state, const OnnxExportOptions& options) {
  write_file_atomic(path, onnx::encode(to_onnx(model, params, state, options)));
}

}  // namespace convoy::io
