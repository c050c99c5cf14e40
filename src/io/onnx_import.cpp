// An ONNX CNN as a trainable convoy model (see onnx.h). Nodes are read in
// their (topological) order; each becomes a layer of a GraphBuilder, or an
// alias of its input (Identity, a Flatten of something already flat), or is
// fused with the next (MatMul + Add of a bias: one Dense). Shapes are
// tracked along the way because some ops are only expressible for some
// shapes (asymmetric pads must be TensorFlow's "same").
#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "convoy/core/error.h"
#include "convoy/io/onnx.h"

namespace convoy::io {
namespace {

using onnx::Node;
using Ref = nn::GraphBuilder::Ref;

constexpr const char* kSupported =
    "Conv, BatchNormalization, Relu, Clip, Sigmoid, Mul, Add, Concat, MaxPool, AveragePool, GlobalAveragePool, "
    "Flatten, Reshape, Gemm, MatMul, LogSoftmax, Dropout, Identity, Constant";

struct Value {
  Ref ref;
  Shape shape;  // without the batch
};

// The tensors a layer of the built model gets, by its parameter order.
struct LayerWeights {
  std::vector<std::vector<float>> params, state;
};

class Importer {
 public:
  Importer(const onnx::Model& m, std::string where) : m_(m), where_(std::move(where)) {}

  ImportedModel run() {
    const onnx::Graph& g = m_.graph;
    for (const auto& t : g.initializers) constants_[t.name] = &t;
    const onnx::ValueInfo* input = nullptr;
    for (const auto& v : g.inputs)
      if (!constants_.count(v.name)) {
        require(!input, where_ + ": the graph has several inputs ('" + (input ? input->name : "") + "', '" + v.name +
                            "'); convoy models take one image batch");
        input = &v;
      }
    require(input != nullptr, where_ + ": the graph has no input");
    require(input->dims.size() == 4 || input->dims.size() == 2,
            where_ + ": input '" + input->name + "' has " + std::to_string(input->dims.size()) +
                " dimensions; convoy takes [N, C, H, W] images or [N, features] rows");
    Shape shape(input->dims.begin() + 1, input->dims.end());
    for (int64_t d : shape)
      require(d > 0, where_ + ": input '" + input->name + "' has a dimension of unknown size besides the batch");
    builder_.emplace(shape);
    values_[input->name] = {builder_->input(), shape};

    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      if (!skip_.count(i)) node(g.nodes[i]);
    }
    require(g.outputs.size() == 1, where_ + ": the graph has " + std::to_string(g.outputs.size()) +
                                       " outputs; convoy models have one");
    const Value& out = value(g.outputs[0].name, "the graph output");
    require(layer_count_ > 0 && out.ref.index == layer_count_ - 1,
            where_ + ": the graph output '" + g.outputs[0].name + "' is not computed by the last node");
    nn::Model model = builder_->build();
    FlatWeights w{std::vector<float>(static_cast<std::size_t>(model.num_parameters())),
                  std::vector<float>(static_cast<std::size_t>(model.num_state()))};
    for (std::size_t k = 0; k < model.layers().size(); ++k) {
      const nn::LayerPlan& plan = model.layers()[k];
      const LayerWeights& lw = weights_[k];
      auto fill = [&](const std::vector<nn::ParamSlot>& slots, const std::vector<std::vector<float>>& from,
                      std::vector<float>& into) {
        require(slots.size() == from.size(), where_ + ": layer '" + plan.name + "' has the wrong number of tensors");
        for (std::size_t s = 0; s < slots.size(); ++s) {
          require(static_cast<int64_t>(from[s].size()) == slots[s].size(),
                  where_ + ": tensor for '" + slots[s].name + "' has " + std::to_string(from[s].size()) +
                      " values, the layer needs " + to_string(slots[s].shape));
          std::copy(from[s].begin(), from[s].end(), into.begin() + slots[s].offset);
        }
      };
      fill(plan.params, lw.params, w.params);
      fill(plan.state, lw.state, w.state);
    }
    return {std::move(model), std::move(w)};
  }

 private:
  [[noreturn]] void fail(const Node& n, const std::string& what) const {
    throw UserError(where_ + ": node '" + n.name + "' (" + n.op_type + "): " + what);
  }
  const Value& value(const std::string& name, const std::string& what) const {
    auto it = values_.find(name);
    require(it != values_.end(), where_ + ": " + what + " '" + name + "' is not computed by any earlier node");
    return it->second;
  }
  const onnx::Tensor* constant(const std::string& name) const {
    auto it = constants_.find(name);
    return it == constants_.end() ? nullptr : it->second;
  }
  const onnx::Tensor& need_constant(const Node& n, std::size_t input) const {
    if (input >= n.inputs.size()) fail(n, "input " + std::to_string(input) + " is missing");
    const onnx::Tensor* t = constant(n.inputs[input]);
    if (!t) fail(n, "input '" + n.inputs[input] + "' must be a constant (weights), not a computed tensor");
    if (t->data_type != onnx::kFloat && t->data_type != onnx::kInt64)
      fail(n, "tensor '" + t->name + "' has ONNX data type " + std::to_string(t->data_type) + "; convoy reads float and int64");
    const std::size_t values = t->data_type == onnx::kFloat ? t->floats.size() : t->int64s.size();
    if (t->numel() < 0 || static_cast<std::size_t>(t->numel()) != values)
      fail(n, "tensor '" + t->name + "' holds " + std::to_string(values) + " values, not what its dimensions say");
    return *t;
  }
  static int64_t int_attr(const Node& n, const std::string& name, int64_t fallback) {
    const auto* a = n.find(name);
    return a ? a->i : fallback;
  }
  static float float_attr(const Node& n, const std::string& name, float fallback) {
    const auto* a = n.find(name);
    return a ? a->f : fallback;
  }
  static std::vector<int64_t> ints_attr(const Node& n, const std::string& name) {
    const auto* a = n.find(name);
    return a ? a->ints : std::vector<int64_t>{};
  }
  // A layer name from its weight's name ("layer1.0.conv1.weight" -> "layer1.0.conv1"), if free.
  std::string layer_name(const std::string& weight) {
    const std::string suffix = ".weight";
    if (weight.size() <= suffix.size() || !weight.ends_with(suffix)) return {};
    std::string name = weight.substr(0, weight.size() - suffix.size());
    return used_names_.insert(name).second ? name : std::string{};
  }

  void add(const Node& n, nn::Layer layer, const std::vector<std::string>& inputs, LayerWeights w = {},
           std::string name = {}, const std::string* output = nullptr) {
    std::vector<Ref> refs;
    std::vector<Shape> shapes;
    for (const auto& in : inputs) {
      const Value& v = value(in, "input of node '" + n.name + "',");
      refs.push_back(v.ref);
      shapes.push_back(v.shape);
    }
    const std::string shown = name.empty() ? n.name : name;
    Shape out = shapes.size() == 1 ? nn::output_shape(layer, shapes[0], shown) : nn::output_shape(layer, shapes, shown);
    const Ref r = builder_->add(std::move(layer), refs, std::move(name));
    ++layer_count_;
    weights_.push_back(std::move(w));
    values_[output ? *output : n.outputs.at(0)] = {r, std::move(out)};
  }
  void alias(const Node& n, const std::string& from) { values_[n.outputs.at(0)] = value(from, "input of node '" + n.name + "',"); }

  // One padding value for both axes and both sides, or "same" where the pads are TensorFlow's.
  int64_t padding(const Node& n, const Shape& in, int64_t kernel, int64_t stride) const {
    const std::string auto_pad = n.find("auto_pad") ? n.find("auto_pad")->s : "NOTSET";
    if (auto_pad == "SAME_UPPER") return nn::kSame;
    if (auto_pad == "VALID") return 0;
    if (auto_pad != "NOTSET") fail(n, "auto_pad " + auto_pad + " is not supported (NOTSET, SAME_UPPER, VALID are)");
    std::vector<int64_t> pads = ints_attr(n, "pads");
    if (pads.empty()) pads = {0, 0, 0, 0};
    if (pads.size() != 4) fail(n, "pads must have 4 values");
    if (pads[0] == pads[1] && pads[0] == pads[2] && pads[0] == pads[3]) return pads[0];
    const nn::Window h = nn::window(in[1], kernel, stride, nn::kSame, n.name), w = nn::window(in[2], kernel, stride, nn::kSame, n.name);
    if (pads == std::vector<int64_t>{h.pad_begin, w.pad_begin, h.pad_end, w.pad_end}) return nn::kSame;
    fail(n, "pads [" + std::to_string(pads[0]) + ", " + std::to_string(pads[1]) + ", " + std::to_string(pads[2]) + ", " +
                std::to_string(pads[3]) + "] are neither equal on all sides nor TensorFlow's \"same\"");
  }
  // kernel and stride of a square 2-D window.
  std::pair<int64_t, int64_t> square_window(const Node& n, std::vector<int64_t> kernel) const {
    if (kernel.size() != 2 || kernel[0] != kernel[1]) fail(n, "only square 2-D kernels are supported");
    std::vector<int64_t> strides = ints_attr(n, "strides");
    if (strides.empty()) strides = {1, 1};
    if (strides.size() != 2 || strides[0] != strides[1]) fail(n, "only equal strides on both axes are supported");
    for (int64_t d : ints_attr(n, "dilations"))
      if (d != 1) fail(n, "dilated kernels are not supported");
    if (int_attr(n, "ceil_mode", 0) != 0) fail(n, "ceil_mode 1 is not supported");
    return {kernel[0], strides[0]};
  }
  const Shape& image_input(const Node& n) const {
    const Shape& s = value(n.inputs.at(0), "input of node '" + n.name + "',").shape;
    if (s.size() != 3) fail(n, "needs an [N, C, H, W] input, gets " + std::to_string(s.size() + 1) + " dimensions");
    return s;
  }
  // A scalar constant input (Clip's min and max), or nullopt when absent.
  std::optional<float> scalar(const Node& n, std::size_t input) const {
    if (input >= n.inputs.size() || n.inputs[input].empty()) return std::nullopt;
    const onnx::Tensor& t = need_constant(n, input);
    if (t.floats.size() != 1) fail(n, "input '" + t.name + "' must be one float");
    return t.floats[0];
  }
  // The consumer of `tensor` when it has exactly one, or npos.
  std::size_t only_consumer(const std::string& tensor) const {
    std::size_t found = std::string::npos;
    for (std::size_t i = 0; i < m_.graph.nodes.size(); ++i)
      for (const auto& in : m_.graph.nodes[i].inputs)
        if (in == tensor) {
          if (found != std::string::npos && found != i) return std::string::npos;
          found = i;
        }
    return found;
  }
  void dense(const Node& n, const std::string& x, std::vector<float> w_rows, int64_t units, std::vector<float> bias,
             const std::string& weight_name, const std::string* output = nullptr) {
    const Shape& s = value(x, "input of node '" + n.name + "',").shape;
    if (s.size() != 1) fail(n, "needs [N, features] rows (flatten first), gets " + std::to_string(s.size() + 1) + " dimensions");
    if (bias.empty()) bias.assign(static_cast<std::size_t>(units), 0.0f);
    if (static_cast<int64_t>(bias.size()) != units) fail(n, "the bias has " + std::to_string(bias.size()) + " values for " + std::to_string(units) + " units");
    add(n, nn::Dense{.units = units}, {x}, {.params = {std::move(w_rows), std::move(bias)}}, layer_name(weight_name), output);
  }

  void node(const Node& n) {
    const std::string& op = n.op_type;
    if (!n.domain.empty() && n.domain != "ai.onnx") fail(n, "ops of domain '" + n.domain + "' are not supported");
    if (n.outputs.empty() || n.outputs[0].empty()) fail(n, "the node has no output");
    if (op != "Constant" && (n.inputs.empty() || n.inputs[0].empty())) fail(n, "the node has no input");
    if (op == "Constant") {
      const auto* v = n.find("value");
      if (!v || !v->t) fail(n, "only tensor constants (attribute 'value') are supported");
      owned_.push_back(*v->t);
      constants_[n.outputs.at(0)] = &owned_.back();
      return;
    }
    if (op == "Identity") return alias(n, n.inputs.at(0));
    if (op == "Dropout") {
      float rate = float_attr(n, "ratio", 0.5f);
      if (auto r = scalar(n, 1)) rate = *r;
      return add(n, nn::Dropout{.rate = rate}, {n.inputs.at(0)});
    }
    if (op == "Conv") {
      const Shape& in = image_input(n);
      const onnx::Tensor& w = need_constant(n, 1);
      if (w.dims.size() != 4) fail(n, "the weight must be [F, C/groups, k, k]");
      const auto [k, stride] = square_window(n, {w.dims[2], w.dims[3]});
      nn::Conv2d c{.filters = w.dims[0], .kernel = k, .stride = stride, .padding = padding(n, in, k, stride),
                   .groups = int_attr(n, "group", 1), .bias = n.inputs.size() > 2 && !n.inputs[2].empty()};
      LayerWeights lw{.params = {w.floats}};
      if (c.bias) lw.params.push_back(need_constant(n, 2).floats);
      return add(n, c, {n.inputs[0]}, std::move(lw), layer_name(w.name));
    }
    if (op == "BatchNormalization") {
      if (n.outputs.size() > 1 && !n.outputs[1].empty()) fail(n, "training-mode batch norm (several outputs) is not supported");
      const onnx::Tensor& scale = need_constant(n, 1);
      return add(n, nn::BatchNorm{.momentum = 1.0f - float_attr(n, "momentum", 0.9f), .eps = float_attr(n, "epsilon", 1e-5f)},
                 {n.inputs[0]},
                 {.params = {scale.floats, need_constant(n, 2).floats}, .state = {need_constant(n, 3).floats, need_constant(n, 4).floats}},
                 layer_name(scale.name));
    }
    if (op == "Relu") return add(n, nn::ReLU{}, {n.inputs.at(0)});
    if (op == "Sigmoid") return add(n, nn::Sigmoid{}, {n.inputs.at(0)});
    if (op == "Clip") {
      std::optional<float> lo = scalar(n, 1), hi = scalar(n, 2);
      if (const auto* a = n.find("min")) lo = a->f;
      if (const auto* a = n.find("max")) hi = a->f;
      if (lo == 0.0f && hi == 6.0f) return add(n, nn::ReLU6{}, {n.inputs[0]});
      if (lo == 0.0f && !hi) return add(n, nn::ReLU{}, {n.inputs[0]});
      fail(n, "only Clip to [0, 6] (ReLU6) or [0, inf) (ReLU) is supported");
    }
    if (op == "Mul" || op == "Add") {
      if (n.inputs.size() != 2) fail(n, "needs two inputs");
      if (constant(n.inputs[0]) || constant(n.inputs[1]))
        fail(n, "a constant operand is not supported (only the bias Add after a MatMul)");
      if (op == "Add") return add(n, nn::Add{}, {n.inputs[0], n.inputs[1]});
      // convoy's Multiply takes the full-size tensor first and the gate second.
      const Shape& a = value(n.inputs[0], "input").shape;
      const Shape& b = value(n.inputs[1], "input").shape;
      const bool swap = numel(a) < numel(b);
      return add(n, nn::Multiply{}, {n.inputs[swap ? 1 : 0], n.inputs[swap ? 0 : 1]});
    }
    if (op == "Concat") {
      const Shape& s = value(n.inputs.at(0), "input").shape;
      const int64_t axis = int_attr(n, "axis", 1);
      if (axis != 1 && axis != -static_cast<int64_t>(s.size() + 1)) fail(n, "only concatenation along channels (axis 1) is supported");
      return add(n, nn::Concat{}, n.inputs);
    }
    if (op == "MaxPool" || op == "AveragePool") {
      const Shape& in = image_input(n);
      const auto [k, stride] = square_window(n, ints_attr(n, "kernel_shape"));
      const int64_t pad = padding(n, in, k, stride);
      if (op == "MaxPool") {
        if (n.outputs.size() > 1) fail(n, "the indices output is not supported");
        return add(n, nn::MaxPool2d{.kernel = k, .stride = stride, .padding = pad}, {n.inputs[0]});
      }
      return add(n, nn::AvgPool2d{.kernel = k, .stride = stride, .padding = pad,
                                  .count_include_pad = int_attr(n, "count_include_pad", 0) != 0},
                 {n.inputs[0]});
    }
    if (op == "GlobalAveragePool") {
      image_input(n);
      return add(n, nn::GlobalAvgPool{.keep_dims = true}, {n.inputs[0]});
    }
    if (op == "Flatten" || op == "Reshape") {
      const Shape& s = value(n.inputs.at(0), "input").shape;
      if (op == "Flatten" && int_attr(n, "axis", 1) != 1) fail(n, "only Flatten with axis 1 is supported");
      if (op == "Reshape") {
        const onnx::Tensor& to = need_constant(n, 1);
        const bool flat = to.int64s.size() == 2 && (to.int64s[1] == -1 || to.int64s[1] == numel(s)) &&
                          (to.int64s[0] == 0 || to.int64s[0] == -1 || to.int64s[0] == 1);
        if (!flat) fail(n, "only reshapes to [N, -1] (flattening) are supported");
      }
      if (s.size() == 1) return alias(n, n.inputs[0]);
      return add(n, nn::Flatten{}, {n.inputs[0]});
    }
    if (op == "Gemm") {
      if (int_attr(n, "transA", 0) != 0 || float_attr(n, "alpha", 1) != 1 || float_attr(n, "beta", 1) != 1)
        fail(n, "only Gemm with transA 0, alpha 1 and beta 1 is supported");
      const onnx::Tensor& w = need_constant(n, 1);
      if (w.dims.size() != 2) fail(n, "the weight must be a matrix");
      std::vector<float> rows = w.floats;  // [units, in] as transB = 1 stores it
      int64_t units = w.dims[0];
      if (int_attr(n, "transB", 0) == 0) {
        units = w.dims[1];
        for (int64_t i = 0; i < w.dims[0]; ++i)
          for (int64_t o = 0; o < units; ++o) rows[static_cast<std::size_t>(o * w.dims[0] + i)] = w.floats[static_cast<std::size_t>(i * units + o)];
      }
      std::vector<float> bias;
      if (n.inputs.size() > 2 && !n.inputs[2].empty()) bias = need_constant(n, 2).floats;
      return dense(n, n.inputs[0], std::move(rows), units, std::move(bias), w.name);
    }
    if (op == "MatMul") {
      const onnx::Tensor& w = need_constant(n, 1);
      if (w.dims.size() != 2) fail(n, "the weight must be a matrix");
      const int64_t in = w.dims[0], units = w.dims[1];
      std::vector<float> rows(w.floats.size());
      for (int64_t i = 0; i < in; ++i)
        for (int64_t o = 0; o < units; ++o) rows[static_cast<std::size_t>(o * in + i)] = w.floats[static_cast<std::size_t>(i * units + o)];
      // MatMul then Add of a constant: one Dense with that bias.
      const std::size_t next = only_consumer(n.outputs.at(0));
      if (next != std::string::npos && m_.graph.nodes[next].op_type == "Add" && m_.graph.nodes[next].inputs.size() == 2 &&
          !m_.graph.nodes[next].outputs.empty()) {
        const Node& a = m_.graph.nodes[next];
        const std::string& other = a.inputs.at(a.inputs[0] == n.outputs[0] ? 1 : 0);
        if (const onnx::Tensor* b = constant(other)) {
          skip_.insert(next);
          return dense(n, n.inputs[0], std::move(rows), units, b->floats, w.name, &a.outputs.at(0));
        }
      }
      return dense(n, n.inputs[0], std::move(rows), units, {}, w.name);
    }
    if (op == "LogSoftmax") {
      const int64_t axis = int_attr(n, "axis", m_.opset >= 13 ? -1 : 1);
      if (value(n.inputs.at(0), "input").shape.size() != 1 || (axis != 1 && axis != -1))
        fail(n, "only LogSoftmax over the features of [N, features] is supported");
      return add(n, nn::LogSoftmax{}, {n.inputs[0]});
    }
    throw UserError(where_ + ": node '" + n.name + "' has op " + op + ", which convoy cannot import (it imports " + kSupported + ")");
  }

  const onnx::Model& m_;
  std::string where_;
  std::map<std::string, const onnx::Tensor*> constants_;
  std::deque<onnx::Tensor> owned_;  // Constant nodes' tensors; a deque keeps pointers stable
  std::map<std::string, Value> values_;
  std::set<std::size_t> skip_;  // nodes fused into an earlier one
  std::set<std::string> used_names_;
  std::optional<nn::GraphBuilder> builder_;
  std::vector<LayerWeights> weights_;  // one per layer added
  int layer_count_ = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), path + ": cannot open the ONNX file");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  require(!in.bad(), path + ": cannot read the ONNX file");
  return std::move(bytes).str();
}

}  // namespace

ImportedModel from_onnx(const onnx::Model& onnx, const std::string& where) { return Importer(onnx, where).run(); }

ImportedModel load_onnx(const std::string& path) {
  return from_onnx(onnx::decode(read_file(path), path), path);
}

}  // namespace convoy::io
