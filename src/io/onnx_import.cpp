// An ONNX CNN as a trainable convoy model (see onnx.h). Nodes are read in
// their (topological) order; each becomes a layer of a GraphBuilder, or an
// alias of its input (Identity, a Flatten of something already flat), or is
// fused with the next (MatMul + Add of a bias: one Dense). Shapes are
// tracked along the way because some ops are only expressible for some
// shapes (asymmetric pads must be TensorFlow's "same").
//
// TensorFlow's exporter (tf2onnx) writes NHWC graphs: an [N, H, W, C] input
// transposed to NCHW for the convolutions, explicit zero Pads before them
// (Keras's ZeroPadding2D, "valid" convolutions), a transpose back to NHWC
// before Keras's Flatten, and a final Softmax. The importer keeps convoy's
// NCHW throughout: the input transpose is dropped (ImportedModel says the
// file took NHWC), a Pad is folded into the padding of the convolution or
// pool it feeds, an NHWC flatten becomes convoy's Flatten with the next
// Dense's weight columns permuted to match, and a last Softmax is left out.
#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"
#include "convoy/io/onnx.h"
#include "io/onnx_fold.h"

namespace convoy::io {
namespace {

using onnx::Node;
using Ref = nn::GraphBuilder::Ref;

constexpr const char* kSupported =
    "Conv, BatchNormalization, Relu, Clip, Sigmoid, Mul, Add, Sub, Div, Concat, MaxPool, AveragePool, GlobalAveragePool, "
    "ReduceMean, Pad, Transpose, Flatten, Reshape, Squeeze, Unsqueeze, Gemm, MatMul, LogSoftmax, Softmax, Dropout, Identity, "
    "Constant, and Shape, Gather, Concat on shapes, ConstantOfShape, Slice, Cast on constants";

struct Value {
  Ref ref;
  Shape shape;  // convoy's, without the batch: [C, H, W] even where the ONNX tensor is NHWC
  // The ONNX tensor is this image as [N, H, W, C] (an NHWC input, or a
  // Transpose with perm [0, 2, 3, 1]): only a Transpose back, a flatten or a
  // ReduceMean over H and W may read it.
  bool nhwc = false;
  // [C*H*W] features in (H, W, C) order (an NHWC image flattened): the image's
  // [C, H, W]. convoy flattens in (C, H, W) order, so the Dense reading them
  // takes its weight columns permuted; element-wise layers pass them on.
  Shape hwc_image;
  // Never negative (after a ReLU, ReLU6 or Sigmoid): zero padding before a
  // max pool then changes nothing, so it folds into the pool's padding.
  bool nonnegative = false;
  // [C] features the ONNX graph unsqueezed to [N, C, 1, 1]: only a Mul may
  // read them, as a channel gate (convoy's Multiply takes [C] gates as they are).
  bool unsqueezed = false;
  // The ONNX tensor's dimensions (without the batch) where they are not
  // `shape`: a reshape that keeps the batch and the values' order ([N, 3, 4]
  // to [N, 12, 1]), or an input of a rank convoy does not store (kept as
  // [N, values] rows). Only element-wise ops pass it on; a flatten, Reshape,
  // Squeeze or Unsqueeze relabels it; other ops refuse it by its shape.
  Shape view;
};

// The ONNX dimensions of a value, without the batch.
Shape dims_of(const Value& v) {
  if (v.unsqueezed) return {v.shape[0], 1, 1};
  if (v.nhwc) return {v.shape[1], v.shape[2], v.shape[0]};
  return v.view.empty() ? v.shape : v.view;
}

// The most values one example may have in any tensor, and the largest
// kernel, stride or pad (core/tensor.h: a model's own bound).
constexpr int64_t kMaxValues = kMaxValuesPerExample;

// The batch dimension in a shape computed from a tensor's (Shape nodes).
constexpr int64_t kBatch = std::numeric_limits<int64_t>::min();

// The zero padding a Pad node folds into its reader: top, left, bottom, right.
using Pads = std::array<int64_t, 4>;

bool elementwise(const nn::Layer& l) {
  return std::holds_alternative<nn::ReLU>(l) || std::holds_alternative<nn::ReLU6>(l) ||
         std::holds_alternative<nn::Sigmoid>(l) || std::holds_alternative<nn::SiLU>(l) ||
         std::holds_alternative<nn::Dropout>(l) || std::holds_alternative<nn::Clip>(l) ||
         std::holds_alternative<nn::Affine>(l);
}

bool keeps_sign(const nn::Layer& l) {
  return std::holds_alternative<nn::MaxPool2d>(l) || std::holds_alternative<nn::AvgPool2d>(l) ||
         std::holds_alternative<nn::GlobalAvgPool>(l) || std::holds_alternative<nn::Dropout>(l) ||
         std::holds_alternative<nn::Flatten>(l) || std::holds_alternative<nn::Concat>(l);
}

using onnx_fold::list;

// "[N, 3, 4]": ONNX dimensions after the batch, with it.
std::string with_batch(const Shape& dims) {
  std::string s = "[N";
  for (int64_t d : dims) s += ", " + std::to_string(d);
  return s + "]";
}

// Axes as non-negative numbers for a tensor of `rank` dimensions, sorted; empty when one is out of range.
std::vector<int64_t> normalized_axes(std::vector<int64_t> axes, int64_t rank) {
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return {};
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

// The tensors a layer of the built model gets, by its parameter order.
struct LayerWeights {
  std::vector<std::vector<float>> params, state;
};

class Importer {
 public:
  Importer(const onnx::Model& m, std::string where) : m_(m), where_(std::move(where)) {}

  ImportedModel run() {
    const onnx::Graph& g = m_.graph;
    for (const auto& t : g.initializers) {
      constants_[t.name] = &t;
      // The values the file holds, not what its dims claim (decoded already).
      fold_budget_ += static_cast<int64_t>(t.floats.size() + t.int64s.size());
    }
    const onnx::ValueInfo* input = nullptr;
    for (const auto& v : g.inputs)
      if (!constants_.count(v.name)) {
        require(!input, where_ + ": the graph has several inputs ('" + shown(input ? input->name : "") + "', '" + shown(v.name) +
                            "'); convoy models take one image batch");
        input = &v;
      }
    require(input != nullptr, where_ + ": the graph has no input");
    require(input->elem_type == onnx::kFloat, where_ + ": input '" + shown(input->name) + "' holds " +
                                                  onnx::data_type_name(input->elem_type) +
                                                  " elements; convoy models take FLOAT input");
    require(input->dims.size() >= 2, where_ + ": input '" + shown(input->name) + "' has " + std::to_string(input->dims.size()) +
                                         " dimension(s); convoy takes a batch of examples: [N, C, H, W] images, [N, features] "
                                         "rows, or another [N, ...] as rows of its values");
    require(input->dims.size() <= 64, where_ + ": input '" + shown(input->name) + "' has more than 64 dimensions");
    batch_ = input->dims[0] > 0 ? input->dims[0] : -1;
    Shape shape(input->dims.begin() + 1, input->dims.end());
    for (int64_t d : shape) {
      require(d != 0, where_ + ": input '" + shown(input->name) + "' has a dimension of size 0; convoy's examples hold values");
      require(d > 0, where_ + ": input '" + shown(input->name) + "' has a dimension of unknown size besides the batch");
    }
    require(bounded_numel(shape) > 0, where_ + ": input '" + shown(input->name) + "' is " + to_string(shape) +
                                          " per example: more than 2^31 values, which convoy does not take");
    // TensorFlow's layout: an [N, H, W, C] input that every reader transposes to NCHW.
    input_nhwc_ = shape.size() == 3 && read_only_by_transposes_to_nchw(input->name);
    if (input_nhwc_) shape = {shape[2], shape[0], shape[1]};
    // Another rank ([N, L], [N, D, H, W, C]): its values as rows, the shape kept as a view.
    Shape view;
    if (shape.size() != 1 && shape.size() != 3) view = std::exchange(shape, Shape{bounded_numel(shape)});
    builder_.emplace(shape);
    values_[input->name] = {.ref = builder_->input(), .shape = shape, .nhwc = input_nhwc_, .view = view};

    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      current_ = i;
      if (!skip_.count(i)) node(g.nodes[i]);
    }
    require(g.outputs.size() == 1, where_ + ": the graph has " + std::to_string(g.outputs.size()) +
                                       " outputs; convoy models have one");
    Value out = value(g.outputs[0].name, "the graph output");
    // A graph that computes nothing convoy keeps as a layer on [N, features]
    // rows (Identity, an unbounded Clip, a last Softmax): one Flatten, the identity.
    if (layer_count_ == 0 && out.ref.index == nn::kModelInput && out.shape.size() == 1 && out.view.empty() &&
        out.hwc_image.empty() && !out.unsqueezed) {
      out.ref = builder_->add(nn::Flatten{}, out.ref);
      weights_.emplace_back();
      ++layer_count_;
    }
    require(layer_count_ > 0, where_ + ": the graph has no node convoy imports as a layer (only " +
                                  "Identity, Transpose, Softmax, Constant and the like)");
    require(!out.nhwc && out.hwc_image.empty() && !out.unsqueezed,
            where_ + ": the graph output '" + shown(g.outputs[0].name) + "' is in NHWC order or unsqueezed, which convoy models do not give");
    require(out.view.empty(), where_ + ": the graph output '" + shown(g.outputs[0].name) + "' is " + with_batch(out.view) +
                                  "; convoy models give [N, C, H, W] images or [N, features] rows (flatten it)");
    require(layer_count_ > 0 && out.ref.index == layer_count_ - 1,
            where_ + ": the graph output '" + shown(g.outputs[0].name) + "' is not computed by the last node");
    std::optional<nn::Model> built;
    try {
      built.emplace(builder_->build());
    } catch (const UserError& e) {  // e.g. a node whose output nothing reads
      throw UserError(where_ + ": " + e.what());
    }
    nn::Model& model = *built;
    // Constant operands stay constants (see constant_operand): their layers are frozen.
    for (const std::string& name : frozen_)
      require(model.set_trainable(false, name) == 1, where_ + ": layer name '" + name + "' is not unique");
    // Every tensor the file gave has the size its layer needs, checked before
    // the flat buffers are allocated: their sizes then come from the file's
    // own bytes, not from shapes it claims (a batch norm over 2^30 channels
    // with one value each).
    for (std::size_t k = 0; k < model.layers().size(); ++k) {
      const nn::LayerPlan& plan = model.layers()[k];
      auto check = [&](const std::vector<nn::ParamSlot>& slots, const std::vector<std::vector<float>>& from) {
        require(slots.size() == from.size(), where_ + ": layer '" + plan.name + "' has the wrong number of tensors");
        for (std::size_t s = 0; s < slots.size(); ++s) {
          require(static_cast<int64_t>(from[s].size()) == slots[s].size(),
                  where_ + ": tensor for '" + slots[s].name + "' has " + std::to_string(from[s].size()) +
                      " values, the layer needs " + to_string(slots[s].shape));
          require_finite_weights(from[s], where_, slots[s].name);
        }
      };
      check(plan.params, weights_[k].params);
      check(plan.state, weights_[k].state);
    }
    FlatWeights w{std::vector<float>(static_cast<std::size_t>(model.num_parameters())),
                  std::vector<float>(static_cast<std::size_t>(model.num_state()))};
    for (std::size_t k = 0; k < model.layers().size(); ++k) {
      const nn::LayerPlan& plan = model.layers()[k];
      for (std::size_t s = 0; s < plan.params.size(); ++s)
        std::copy(weights_[k].params[s].begin(), weights_[k].params[s].end(), w.params.begin() + plan.params[s].offset);
      for (std::size_t s = 0; s < plan.state.size(); ++s)
        std::copy(weights_[k].state[s].begin(), weights_[k].state[s].end(), w.state.begin() + plan.state[s].offset);
    }
    return {std::move(model), std::move(w), input_nhwc_, softmax_dropped_};
  }

 private:
  // "node 'conv1' (Conv)", or "node #3 (Concat)" (its index in the graph) when it has no name.
  std::string label(const Node& n) const {
    if (!n.name.empty()) return "node '" + shown(n.name) + "' (" + shown(n.op_type) + ")";
    return "node #" + std::to_string(&n - m_.graph.nodes.data()) + " (" + shown(n.op_type) + ")";
  }
  // The name a node's messages from nn:: start with: its own, else its label.
  std::string shown_name(const Node& n) const { return n.name.empty() ? label(n) : n.name; }
  [[noreturn]] void fail(const Node& n, const std::string& what) const { throw UserError(where_ + ": " + label(n) + ": " + what); }
  const Value& value(const std::string& name, const std::string& what) const {
    auto it = values_.find(name);
    require(it != values_.end() || !constant(name), where_ + ": " + what + " '" + shown(name) + "' is a constant; convoy models compute their output from the input");
    require(it != values_.end() || !shape_values_.count(name),
            where_ + ": " + what + " '" + shown(name) + "' is a shape (Shape, Gather, ...), which convoy evaluates at import; its models compute tensors");
    require(it != values_.end(), where_ + ": " + what + " '" + shown(name) + "' is not computed by any earlier node");
    return it->second;
  }
  // The computed tensor `name` that node n reads; a constant there is refused
  // as one. A reshaped value (Value::view) only where the caller takes one.
  const Value& input(const Node& n, const std::string& name, bool views = false) const {
    auto it = values_.find(name);
    if (it != values_.end()) {
      if (!views && !it->second.view.empty())
        fail(n, "input '" + shown(name) + "' is " + with_batch(it->second.view) +
                    ", which convoy imports only into element-wise ops, Flatten, Reshape, Squeeze and Unsqueeze");
      return it->second;
    }
    if (const onnx::Tensor* t = constant(name))
      fail(n, shown(n.op_type) + " with a constant operand ('" + shown(name) + "', " + onnx::data_type_name(t->data_type) + " " +
                  list(t->dims) + ") is not supported; convoy takes a computed tensor there");
    fail(n, "input '" + shown(name) + "' is not computed by any earlier node");
  }
  // `axis` of a tensor of `rank` dimensions as a non-negative number (ONNX counts negative ones from the end).
  int64_t normalized_axis(const Node& n, int64_t axis, int64_t rank) const {
    if (axis < -rank || axis >= rank)
      fail(n, "axis " + std::to_string(axis) + " is out of range for a tensor of " + std::to_string(rank) + " dimensions");
    return axis < 0 ? axis + rank : axis;
  }
  // The number of dimensions of the ONNX tensor a value stands for, batch included.
  static int64_t rank_of(const Value& v) { return v.unsqueezed ? 4 : static_cast<int64_t>(v.shape.size()) + 1; }
  const onnx::Tensor* constant(const std::string& name) const {
    auto it = constants_.find(name);
    return it == constants_.end() ? nullptr : it->second;
  }
  const onnx::Tensor& need_constant(const Node& n, std::size_t input) const {
    if (input >= n.inputs.size()) fail(n, "input " + std::to_string(input) + " is missing");
    const onnx::Tensor* t = constant(n.inputs[input]);
    if (!t) fail(n, "input '" + n.inputs[input] + "' must be a constant (weights), not a computed tensor");
    if (!onnx::is_floating(t->data_type) && !onnx::is_integer(t->data_type))
      fail(n, "tensor '" + t->name + "' has ONNX data type " + onnx::data_type_name(t->data_type) +
                  ", which convoy does not read (it reads floating-point, integer and bool tensors)");
    const std::size_t values = onnx::is_floating(t->data_type) ? t->floats.size() : t->int64s.size();
    if (t->numel() < 0 || static_cast<std::size_t>(t->numel()) != values)
      fail(n, "tensor '" + t->name + "' holds " + std::to_string(values) + " values, not what its dimensions say");
    return *t;
  }
  // A constant input of floating-point values (weights): FLOAT, FLOAT16, BFLOAT16 or DOUBLE, as floats.
  const onnx::Tensor& need_float(const Node& n, std::size_t input) const {
    const onnx::Tensor& t = need_constant(n, input);
    if (!onnx::is_floating(t.data_type))
      fail(n, "tensor '" + t.name + "' is " + onnx::data_type_name(t.data_type) + "; this input takes floating-point values");
    return t;
  }
  // A constant input of integers (shapes, axes, indices): any integer type or BOOL, as int64s.
  const onnx::Tensor& need_integers(const Node& n, std::size_t input) const {
    const onnx::Tensor& t = need_constant(n, input);
    if (!onnx::is_integer(t.data_type))
      fail(n, "tensor '" + t.name + "' is " + onnx::data_type_name(t.data_type) + "; this input takes integers");
    return t;
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

  // Adds `layer` reading `inputs`; returns the value it computes.
  Value& add(const Node& n, nn::Layer layer, const std::vector<std::string>& inputs, LayerWeights w = {},
             std::string name = {}, const std::string* output = nullptr, bool reads_nhwc = false) {
    std::vector<Ref> refs;
    std::vector<Shape> shapes;
    Shape hwc_image;
    bool nonnegative = true;
    Shape view;  // passed on by element-wise layers
    for (const auto& in : inputs) {
      const Value& v = input(n, in, elementwise(layer) || std::holds_alternative<nn::Flatten>(layer));
      if (elementwise(layer)) view = v.view;
      if (v.nhwc && !reads_nhwc)
        fail(n, "reads an NHWC tensor (a Transpose with perm [0, 2, 3, 1]), which convoy imports only before a "
                "flatten, a ReduceMean over H and W, or the Transpose back to NCHW");
      if (v.unsqueezed && !std::holds_alternative<nn::Multiply>(layer))
        fail(n, "reads an Unsqueeze to [N, C, 1, 1], which convoy imports only as the channel gate of a Mul");
      if (!v.hwc_image.empty()) {
        if (!elementwise(layer) && !std::holds_alternative<nn::Dense>(layer))
          fail(n, "reads features flattened in NHWC order, which convoy imports only into element-wise ops and "
                  "a MatMul or Gemm");
        if (elementwise(layer)) hwc_image = v.hwc_image;
      }
      nonnegative = nonnegative && v.nonnegative;
      refs.push_back(v.ref);
      shapes.push_back(v.shape);
    }
    const std::string shown = name.empty() ? shown_name(n) : name;
    Shape out;
    try {
      out = shapes.size() == 1 ? nn::output_shape(layer, shapes[0], shown) : nn::output_shape(layer, shapes, shown);
    } catch (const UserError& e) {  // the layer's message, "<node>: ...", with the file
      throw UserError(where_ + ": " + e.what());
    }
    if (bounded_numel(out) < 0) fail(n, "its output has more than 2^31 values per example");
    const auto* clip = std::get_if<nn::Clip>(&layer);
    const bool out_nonnegative = std::holds_alternative<nn::ReLU>(layer) || std::holds_alternative<nn::ReLU6>(layer) ||
                                 std::holds_alternative<nn::Sigmoid>(layer) || (clip && clip->min >= 0) ||
                                 (keeps_sign(layer) && nonnegative);
    is_dense_.push_back(std::holds_alternative<nn::Dense>(layer));
    is_affine_.push_back(std::holds_alternative<nn::Affine>(layer));
    layer_output_.push_back(output ? *output : n.outputs.at(0));
    const Ref r = builder_->add(std::move(layer), refs, std::move(name));
    ++layer_count_;
    weights_.push_back(std::move(w));
    Value& v = values_[output ? *output : n.outputs.at(0)];
    v = {.ref = r, .shape = std::move(out), .hwc_image = std::move(hwc_image), .nonnegative = out_nonnegative, .view = view};
    return v;
  }
  void alias(const Node& n, const std::string& from) { values_[n.outputs.at(0)] = input(n, from, /*views=*/true); }

  // The padding of a Conv or pool as one convoy value: equal on all sides, or
  // "same" where the pads are TensorFlow's. A Pad folded into the node adds its own.
  int64_t padding(const Node& n, const Shape& in, int64_t kernel, int64_t stride) const {
    const std::string auto_pad = n.find("auto_pad") ? n.find("auto_pad")->s : "NOTSET";
    const auto folded = folded_pads_.find(current_);
    const Pads extra = folded == folded_pads_.end() ? Pads{0, 0, 0, 0} : folded->second;
    Pads own{0, 0, 0, 0};  // top, left, bottom, right
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      // "same" for the padded size the node sees; SAME_LOWER pads an odd
      // row or column first, which is SAME_UPPER when the pads are even.
      const nn::Window h = nn::window(in[1] + extra[0] + extra[2], kernel, stride, nn::kSame, shown_name(n)),
                       w = nn::window(in[2] + extra[1] + extra[3], kernel, stride, nn::kSame, shown_name(n));
      if (auto_pad == "SAME_LOWER" && (h.pad_begin != h.pad_end || w.pad_begin != w.pad_end))
        fail(n, "auto_pad SAME_LOWER pads the odd row or column first; convoy's \"same\" (SAME_UPPER) pads it last");
      if (folded == folded_pads_.end()) return nn::kSame;
      own = {h.pad_begin, w.pad_begin, h.pad_end, w.pad_end};
    } else if (auto_pad == "NOTSET") {
      const std::vector<int64_t> pads = ints_attr(n, "pads");
      if (!pads.empty() && pads.size() != 4) fail(n, "pads must have 4 values");
      if (!pads.empty()) own = {pads[0], pads[1], pads[2], pads[3]};
    } else if (auto_pad != "VALID") {
      fail(n, "auto_pad " + auto_pad + " is not supported (NOTSET, SAME_UPPER, VALID and an even SAME_LOWER are)");
    }
    std::vector<int64_t> total(4);
    for (std::size_t i = 0; i < 4; ++i) {
      if (own[i] < -kMaxValues || own[i] > kMaxValues) fail(n, "pads " + list({own.begin(), own.end()}) + " are out of range");
      total[i] = own[i] + extra[i];
    }
    const std::string padded = folded == folded_pads_.end() ? "" : " (with the Pad before it)";
    for (int64_t p : total)
      if (p < 0 || p > kMaxValues) fail(n, "pads " + list(total) + padded + " are out of range");
    if (total[0] == total[1] && total[0] == total[2] && total[0] == total[3]) return total[0];
    const nn::Window h = nn::window(in[1], kernel, stride, nn::kSame, shown_name(n)), w = nn::window(in[2], kernel, stride, nn::kSame, shown_name(n));
    if (total == std::vector<int64_t>{h.pad_begin, w.pad_begin, h.pad_end, w.pad_end}) return nn::kSame;
    fail(n, "pads " + list(total) + padded + " are neither equal on all sides nor TensorFlow's \"same\"");
  }
  // kernel and stride of a square 2-D window.
  std::pair<int64_t, int64_t> square_window(const Node& n, std::vector<int64_t> kernel) const {
    if (kernel.size() != 2 || kernel[0] != kernel[1]) fail(n, "only square 2-D kernels are supported");
    std::vector<int64_t> strides = ints_attr(n, "strides");
    if (strides.empty()) strides = {1, 1};
    if (strides.size() != 2 || strides[0] != strides[1]) fail(n, "only equal strides on both axes are supported");
    if (kernel[0] < 1 || kernel[0] > kMaxValues || strides[0] < 1 || strides[0] > kMaxValues)
      fail(n, "kernel " + std::to_string(kernel[0]) + " or stride " + std::to_string(strides[0]) + " is out of range");
    for (int64_t d : ints_attr(n, "dilations"))
      if (d != 1) fail(n, "dilated kernels are not supported");
    return {kernel[0], strides[0]};
  }
  const Shape& image_input(const Node& n) const {
    const Value& v = input(n, n.inputs.at(0));
    if (v.shape.size() != 3) fail(n, "needs an [N, C, H, W] input, gets " + std::to_string(v.shape.size() + 1) + " dimensions");
    if (v.nhwc) fail(n, "needs an [N, C, H, W] input, gets an NHWC tensor");
    return v.shape;
  }
  // Every reader of `tensor` is a Transpose with perm [0, 3, 1, 2] (NHWC to NCHW), and there is one.
  bool read_only_by_transposes_to_nchw(const std::string& tensor) const {
    bool any = false;
    for (const auto& node : m_.graph.nodes)
      for (const auto& in : node.inputs)
        if (in == tensor) {
          const auto* perm = node.find("perm");
          if (node.op_type != "Transpose" || !perm || perm->ints != std::vector<int64_t>{0, 3, 1, 2}) return false;
          any = true;
        }
    return any;
  }
  // `tensor` is the graph's output, or reaches it through Identity nodes only.
  bool is_output(std::string tensor) const {
    for (std::size_t hops = 0; hops <= m_.graph.nodes.size(); ++hops) {
      if (m_.graph.outputs.size() == 1 && tensor == m_.graph.outputs[0].name) return true;
      const std::size_t next = only_consumer(tensor);
      if (next == std::string::npos || m_.graph.nodes[next].op_type != "Identity" || m_.graph.nodes[next].outputs.empty())
        return false;
      tensor = m_.graph.nodes[next].outputs[0];
    }
    return false;
  }
  // Int64 values from constant input `input`, or from attribute `name` when that input is absent.
  std::optional<std::vector<int64_t>> ints_input(const Node& n, std::size_t input, const std::string& name) const {
    if (input < n.inputs.size() && !n.inputs[input].empty()) {
      return need_integers(n, input).int64s;
    }
    if (const auto* a = n.find(name)) return a->ints;
    return std::nullopt;
  }
  // A scalar constant input (Clip's min and max), or nullopt when absent.
  std::optional<float> scalar(const Node& n, std::size_t input) const {
    if (input >= n.inputs.size() || n.inputs[input].empty()) return std::nullopt;
    const onnx::Tensor& t = need_float(n, input);
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
  // A Dense's bias from a constant that broadcasts over [N, units] the same for
  // every row: one value, or [units] with any leading 1s. A bias that differs
  // by row ([N, units]) has no Dense equivalent.
  // (`weights` is the weight's value count: a valid weight has at least one per
  // unit, so a scalar is broadcast only that far; dense() refuses the rest.)
  std::vector<float> bias_for(const Node& n, const onnx::Tensor& b, int64_t units, std::size_t weights) const {
    if (b.numel() == 1)
      return units > 0 && static_cast<std::size_t>(units) <= weights ? std::vector<float>(static_cast<std::size_t>(units), b.floats.at(0))
                                                                       : b.floats;
    bool per_unit = !b.dims.empty() && b.dims.back() == units;
    for (std::size_t i = 0; i + 1 < b.dims.size(); ++i) per_unit = per_unit && b.dims[i] == 1;
    if (!per_unit)
      fail(n, "the bias '" + b.name + "' is " + list(b.dims) + "; convoy's Dense takes one value per unit ([" +
                  std::to_string(units) + "] or [1, " + std::to_string(units) + "]) or a scalar, the same for every row");
    return b.floats;
  }
  void dense(const Node& n, const std::string& x, std::vector<float> w_rows, int64_t units, std::vector<float> bias,
             const std::string& weight_name, const std::string* output = nullptr) {
    const Shape& s = input(n, x).shape;
    if (s.size() != 1) fail(n, "needs [N, features] rows (flatten first), gets " + std::to_string(s.size() + 1) + " dimensions");
    if (units <= 0 || w_rows.size() % static_cast<std::size_t>(units) != 0 ||
        static_cast<int64_t>(w_rows.size()) / units != s[0])
      fail(n, "the weight has " + std::to_string(w_rows.size()) + " values for " + std::to_string(s[0]) + " inputs and " +
                  std::to_string(units) + " units");
    const Shape& hwc = input(n, x).hwc_image;
    if (!hwc.empty()) {  // columns in (H, W, C) order, as the NHWC flatten before it: to convoy's (C, H, W)
      const int64_t c = hwc[0], hw = hwc[1] * hwc[2];
      std::vector<float> chw(w_rows.size());
      for (int64_t o = 0; o < units; ++o)
        for (int64_t p = 0; p < hw; ++p)
          for (int64_t k = 0; k < c; ++k)
            chw[static_cast<std::size_t>(o * s[0] + k * hw + p)] = w_rows[static_cast<std::size_t>(o * s[0] + p * c + k)];
      w_rows = std::move(chw);
    }
    if (bias.empty()) bias.assign(static_cast<std::size_t>(units), 0.0f);
    if (static_cast<int64_t>(bias.size()) != units) fail(n, "the bias has " + std::to_string(bias.size()) + " values for " + std::to_string(units) + " units");
    add(n, nn::Dense{.units = units}, {x}, {.params = {std::move(w_rows), std::move(bias)}}, layer_name(weight_name), output);
  }

  // Every input of n is a constant (and there is one): fold computes it.
  bool all_constant(const Node& n) const {
    bool any = false;
    for (const auto& in : n.inputs) {
      if (in.empty()) continue;
      if (!constant(in) || shape_values_.count(in)) return false;
      any = true;
    }
    return any;
  }
  void fold(const Node& n) {
    std::vector<const onnx::Tensor*> in;
    for (const auto& name : n.inputs) in.push_back(name.empty() ? nullptr : constant(name));
    try {
      // Every fold draws on one budget: the file's folded constants together
      // hold at most 2^26 values more than its initializers (each of which
      // an exporter may pass through one fold, a Transpose or an Identity),
      // however many nodes each make up to that.
      owned_.push_back(onnx_fold::fold_node(n, in, m_.opset, fold_budget_ - folded_values_));
      folded_values_ += owned_.back().numel();
    } catch (const onnx_fold::FoldError& e) {
      fail(n, std::string("its inputs are constants, which convoy folds, but ") + e.what());
    }
    constants_[n.outputs.at(0)] = &owned_.back();
  }

  // x op c or c op x (Add, Sub, Mul, Div) with a constant c, as x * scale +
  // shift (exact for Add, Sub and Mul, Div as a product by 1/c). One value, or
  // one per channel: on an image a frozen depthwise 1x1 convolution, on the
  // rows a Gemm or MatMul computes folded into that layer's weight and bias.
  // Any other c that broadcasts to one example's shape (the same for every
  // example): a frozen Affine holding scale and shift of that shape. A c that
  // differs along the batch is refused: no layer holds one.
  void constant_operand(const Node& n, std::size_t xi) {
    const std::string& op = n.op_type;
    const std::string& x_name = n.inputs[xi];
    const onnx::Tensor& c = need_float(n, 1 - xi);
    const std::string what = op + " with a constant operand ('" + shown(c.name) + "', " + list(c.dims) + ")";
    if (op == "Div" && xi == 1) fail(n, what + " as the dividend is not supported (only a computed tensor divided by a constant)");
    const Value& x = input(n, x_name, /*views=*/true);
    // After an Affine nothing else reads: folded into it (convoy's export
    // of an Affine, Mul then Add, imports as the one layer it was).
    if (read_only_here(x_name, is_affine_)) return per_element_operand(n, xi, c, what);
    const Shape dims = dims_of(x);
    const int64_t rank = static_cast<int64_t>(dims.size()) + 1, channel_axis = x.nhwc ? rank - 1 : 1;
    const int64_t channels = dims[static_cast<std::size_t>(channel_axis - 1)];
    bool per_channel = static_cast<int64_t>(c.dims.size()) <= rank && !x.unsqueezed && x.hwc_image.empty() && x.view.empty();
    for (std::size_t k = 0; per_channel && k < c.dims.size(); ++k) {
      const int64_t axis = rank - static_cast<int64_t>(c.dims.size()) + static_cast<int64_t>(k);
      per_channel = c.dims[k] == 1 || (axis == channel_axis && c.dims[k] == channels);
    }
    const bool image = dims.size() == 3, rows = dims.size() == 1;
    const bool after_dense = rows && read_only_here(x_name, is_dense_);
    if (!per_channel || !(image || after_dense)) return per_element_operand(n, xi, c, what);
    auto [scale, shift] = affine_of(op, xi, c.floats, static_cast<std::size_t>(channels));
    if (after_dense) return fold_scale_shift(n, x, scale, shift);
    add_constant_layer(n, x_name, nn::Conv2d{.filters = channels, .kernel = 1, .groups = channels}, std::move(scale),
                       std::move(shift));
  }
  // x * scale + shift folded into the layer that computes x, a Dense or an
  // Affine (its weight [units, in], in = 1 for an Affine):
  // (x W^T + b) * s + t = x (s W)^T + (s b + t). Its output is then this node's.
  void fold_scale_shift(const Node& n, const Value& x, const std::vector<float>& scale, const std::vector<float>& shift) {
    const auto layer = static_cast<std::size_t>(x.ref.index);
    LayerWeights& w = weights_[layer];
    const std::size_t in = w.params[0].size() / scale.size();
    for (std::size_t o = 0; o < scale.size(); ++o) {
      for (std::size_t i = 0; i < in; ++i) w.params[0][o * in + i] *= scale[o];
      w.params[1][o] = w.params[1][o] * scale[o] + shift[o];
    }
    values_[n.outputs.at(0)] = x;
    layer_output_[layer] = n.outputs.at(0);
  }
  // A frozen layer holding a constant operand's scale and shift, reading x in its layout.
  void add_constant_layer(const Node& n, const std::string& x_name, nn::Layer layer, std::vector<float> scale,
                          std::vector<float> shift) {
    const bool nhwc = values_.at(x_name).nhwc;
    const std::string name = constant_layer_name();
    Value& out = add(n, std::move(layer), {x_name}, {.params = {std::move(scale), std::move(shift)}}, name, nullptr,
                     /*reads_nhwc=*/true);
    out.nhwc = nhwc;
    frozen_.push_back(name);
  }
  // x op c as x * scale + shift for `count` values of c (a single value repeats).
  static std::pair<std::vector<float>, std::vector<float>> affine_of(const std::string& op, std::size_t xi,
                                                                     const std::vector<float>& c, std::size_t count) {
    std::vector<float> scale(count, 1.0f), shift(count, 0.0f);
    for (std::size_t i = 0; i < count; ++i) {
      const float v = c[c.size() == 1 ? 0 : i];
      if (op == "Add") shift[i] = v;
      else if (op == "Sub") (xi == 0 ? shift[i] = -v : (scale[i] = -1.0f, shift[i] = v));
      else if (op == "Mul") scale[i] = v;
      else scale[i] = 1.0f / v;
    }
    return {std::move(scale), std::move(shift)};
  }
  // `tensor` is what a layer of a kind `kinds` marks computes (not an alias
  // of it, which another node could read past), and only the current node reads it.
  bool read_only_here(const std::string& tensor, const std::vector<bool>& kinds) const {
    const auto k = static_cast<std::size_t>(values_.at(tensor).ref.index);
    return values_.at(tensor).ref.index >= 0 && k < kinds.size() && kinds[k] && layer_output_[k] == tensor &&
           only_consumer(tensor) == current_ && !is_output(tensor);
  }
  std::string constant_layer_name() {
    for (int k = 0;; ++k)
      if (used_names_.insert("onnx_constant_" + std::to_string(k)).second) return "onnx_constant_" + std::to_string(k);
  }
  // constant_operand's general case: c broadcast (ONNX's numpy rules) to one
  // example's ONNX dimensions, then put in convoy's order (an NHWC image or
  // its flattened features hold (H, W, C) where convoy holds (C, H, W)).
  void per_element_operand(const Node& n, std::size_t xi, const onnx::Tensor& c, const std::string& what) {
    const std::string& x_name = n.inputs[xi];
    const Value& x = input(n, x_name, /*views=*/true);
    const Shape dims = dims_of(x);
    const std::size_t r = dims.size(), k = c.dims.size();
    bool fits = !x.unsqueezed && k <= r + 1 && (k <= r || c.dims[0] == 1);
    for (std::size_t j = 0; fits && j < std::min(k, r); ++j) {
      const int64_t cd = c.dims[k - 1 - j], xd = dims[r - 1 - j];
      fits = cd == 1 || cd == xd;
    }
    if (!fits)
      fail(n, what + " on " + with_batch(dims) + " is not supported: convoy takes a constant that broadcasts to one " +
                  "example's shape, the same for every example (it has no layer that holds one per example)");
    // As much as the folder holds: a scalar file must not claim gigabytes of weights.
    if (bounded_numel(dims) > onnx_fold::kMaxFoldedValues)
      fail(n, what + " on " + with_batch(dims) + " would hold more than 2^26 values per example; convoy does not take it");
    // Strides of c over x's dimensions: 0 along an axis c broadcasts.
    const std::size_t values = static_cast<std::size_t>(bounded_numel(dims));
    std::vector<int64_t> stride(r, 0);
    for (int64_t j = 0, s = 1; j < static_cast<int64_t>(std::min(k, r)); ++j) {
      const int64_t cd = c.dims[k - 1 - static_cast<std::size_t>(j)];
      if (cd != 1) stride[r - 1 - static_cast<std::size_t>(j)] = s;
      s *= cd;
    }
    std::vector<float> expanded(values);
    for (std::size_t i = 0; i < values; ++i) {
      int64_t at = 0, rest = static_cast<int64_t>(i);
      for (std::size_t j = r; j-- > 0;) {
        at += (rest % dims[j]) * stride[j];
        rest /= dims[j];
      }
      expanded[i] = c.floats[static_cast<std::size_t>(at)];
    }
    const Shape hwc = x.nhwc ? x.shape : x.hwc_image;  // [C, H, W] of values held as (H, W, C)
    if (!hwc.empty()) {
      const int64_t ch = hwc[0], pixels = hwc[1] * hwc[2];
      std::vector<float> chw(values);
      for (int64_t p = 0; p < pixels; ++p)
        for (int64_t q = 0; q < ch; ++q)
          chw[static_cast<std::size_t>(q * pixels + p)] = expanded[static_cast<std::size_t>(p * ch + q)];
      expanded = std::move(chw);
    }
    auto [scale, shift] = affine_of(n.op_type, xi, expanded, values);
    if (read_only_here(x_name, is_affine_)) return fold_scale_shift(n, x, scale, shift);
    add_constant_layer(n, x_name, nn::Affine{}, std::move(scale), std::move(shift));
  }

  // Some node or the graph's output reads `tensor`.
  bool is_read(const std::string& tensor) const {
    for (const auto& node : m_.graph.nodes)
      if (std::find(node.inputs.begin(), node.inputs.end(), tensor) != node.inputs.end()) return true;
    return std::any_of(m_.graph.outputs.begin(), m_.graph.outputs.end(), [&](const auto& o) { return o.name == tensor; });
  }
  // Dropout's mask, MaxPool's indices: imported when nothing reads them.
  void unread_second_output(const Node& n, const std::string& what) const {
    for (std::size_t i = 1; i < n.outputs.size(); ++i)
      if (!n.outputs[i].empty() && is_read(n.outputs[i]))
        fail(n, "its " + what + " output '" + shown(n.outputs[i]) + "' is read, which convoy does not compute");
  }
  // ceil_mode 1 where it gives as many windows as convoy's floor: ONNX's
  // ceil((size + pads - kernel) / stride) + 1, less the last window when it
  // would start in the end padding.
  void ceil_changes_nothing(const Node& n, const Shape& in, int64_t kernel, int64_t stride, int64_t pad) const {
    for (std::size_t axis : {std::size_t{1}, std::size_t{2}}) {
      if (pad != nn::kSame && in[axis] + 2 * pad < kernel) return;  // the layer refuses it, naming it
      const nn::Window w = nn::window(in[axis], kernel, stride, pad, shown_name(n));
      const int64_t span = in[axis] + w.pad_begin + w.pad_end - kernel;
      int64_t out = (span + stride - 1) / stride + 1;
      if ((out - 1) * stride >= in[axis] + w.pad_begin) --out;
      if (out != w.out)
        fail(n, "ceil_mode 1 gives " + std::to_string(out) + " windows where convoy's pools give " + std::to_string(w.out) +
                    "; only a ceil_mode that changes nothing is supported");
    }
  }

  // Flatten, Reshape, Squeeze and Unsqueeze keep the values' order: each
  // relabels the ONNX dimensions after the batch, which stays first. To
  // [N, features] that is convoy's Flatten (nothing on rows), to convoy's own
  // shape nothing, to another shape a view (Value::view) that element-wise
  // ops pass on and a later flatten or reshape relabels again.
  void reshape_like(const Node& n) {
    const std::string& op = n.op_type;
    const Value v = input(n, n.inputs.at(0), /*views=*/true);
    const Shape dims = dims_of(v);
    const int64_t rank = static_cast<int64_t>(dims.size()) + 1, values = bounded_numel(dims);
    Shape to;
    if (op == "Flatten") {
      const int64_t written = int_attr(n, "axis", 1), axis = normalized_axis(n, written, rank);
      int64_t lead = 1;  // what joins the batch in the first output axis
      for (int64_t k = 1; k < axis; ++k) lead *= dims[static_cast<std::size_t>(k - 1)];
      if (axis == 0 && batch_ != 1)
        fail(n, "axis " + std::to_string(written) + " makes the whole batch one row; convoy keeps the batch axis (axis 1), "
                "which is the same only in a file whose batch size is 1");
      if (lead != 1)
        fail(n, "axis " + std::to_string(written) + " joins the batch with the next " + std::to_string(lead) +
                    " values ([N*" + std::to_string(lead) + ", ...]); convoy keeps the batch axis (axis 1)");
      to = {values};
    } else if (op == "Reshape") {
      to = reshape_target(n, dims);
    } else if (op == "Squeeze") {
      std::set<int64_t> drop;
      if (const auto axes = ints_input(n, 1, "axes")) {
        for (int64_t a : *axes) {
          const int64_t k = normalized_axis(n, a, rank);
          if (k == 0) fail(n, "squeezes the batch axis; convoy keeps it");
          if (dims[static_cast<std::size_t>(k - 1)] != 1)
            fail(n, "axis " + std::to_string(a) + " of " + with_batch(dims) + " has size " +
                        std::to_string(dims[static_cast<std::size_t>(k - 1)]) + ", not 1");
          drop.insert(k);
        }
      } else {
        if (batch_ == 1) fail(n, "without axes it squeezes the batch of 1 too; convoy keeps the batch (give the axes)");
        for (int64_t k = 1; k < rank; ++k)
          if (dims[static_cast<std::size_t>(k - 1)] == 1) drop.insert(k);
      }
      for (int64_t k = 1; k < rank; ++k)
        if (!drop.count(k)) to.push_back(dims[static_cast<std::size_t>(k - 1)]);
    } else {  // Unsqueeze
      const auto axes = ints_input(n, 1, "axes");
      if (!axes) fail(n, "the axes are missing");
      const int64_t out_rank = rank + static_cast<int64_t>(axes->size());
      if (out_rank > 64) fail(n, "the result has more than 64 dimensions");
      std::set<int64_t> at;
      for (int64_t a : *axes) {
        const int64_t k = normalized_axis(n, a, out_rank);
        if (k == 0) fail(n, "unsqueezes before the batch axis; convoy keeps the batch first");
        if (!at.insert(k).second) fail(n, "axes " + list(*axes) + " name one axis twice");
      }
      std::size_t next = 0;
      for (int64_t k = 1; k < out_rank; ++k) to.push_back(at.count(k) ? 1 : dims[next++]);
    }
    relabel(n, v, to);
  }
  // Reshape's target without the batch: its first dimension must be the
  // batch (0 or the batch itself, the batch size the file fixes, or any
  // number when the others hold one example's values; [1, -1] too, as
  // exporters write it for a batch of 1), 0 copies an input dimension
  // (unless allowzero), one -1 is inferred.
  Shape reshape_target(const Node& n, const Shape& dims) {
    const std::vector<int64_t> d = n.inputs.size() > 1 && shape_values_.count(n.inputs[1]) ? shape_values_.at(n.inputs[1])
                                                                                           : need_integers(n, 1).int64s;
    const bool allowzero = int_attr(n, "allowzero", 0) != 0;
    const int64_t values = bounded_numel(dims);
    auto shape_text = [&] {
      std::string s = "[";
      for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + (d[i] == kBatch ? std::string("N") : std::to_string(d[i]));
      return s + "]";
    };
    auto refuse = [&](const std::string& why) { fail(n, "reshapes " + with_batch(dims) + " to " + shape_text() + ": " + why); };
    if (d.size() < 2) refuse("convoy models keep the batch axis and at least one more");
    if (d.size() > 64) refuse("more than 64 dimensions");
    Shape rest;
    int64_t known = 1, infer = -1;
    for (std::size_t i = 1; i < d.size(); ++i) {
      int64_t x = d[i];
      if (x == kBatch) refuse("the batch moves from the first axis, which convoy does not do");
      if (x == 0 && !allowzero) {
        if (i - 1 >= dims.size()) refuse("0 copies a dimension the input does not have");
        x = dims[i - 1];
      }
      if (x == -1) {
        if (infer >= 0) refuse("two dimensions are -1");
        infer = static_cast<int64_t>(rest.size());
        rest.push_back(-1);
        continue;
      }
      if (x <= 0) refuse("only positive sizes, 0 (copy) and -1 (infer) are supported");
      if (known > kMaxValues / x) refuse("more than 2^31 values per example");
      known *= x;
      rest.push_back(x);
    }
    const int64_t first = d[0];
    const bool exact = infer < 0 && known == values;
    const bool keeps_batch = first == kBatch || (first == 0 && !allowzero) || (batch_ > 0 && first == batch_) ||
                             (exact && (first == -1 || first > 0)) || (first == 1 && d.size() == 2 && infer >= 0);
    if (!keeps_batch) refuse("only reshapes that keep the batch as the first axis are supported");
    if (infer >= 0) {
      if (values % known != 0) refuse("the sizes do not divide the example's " + std::to_string(values) + " values");
      rest[static_cast<std::size_t>(infer)] = values / known;
    } else if (known != values) {
      refuse("the sizes do not hold the example's " + std::to_string(values) + " values");
    }
    return rest;
  }
  // The value of node n's output: v's values with ONNX dimensions `to` after the batch.
  void relabel(const Node& n, const Value& v, const Shape& to) {
    if (to.empty()) fail(n, "gives one value per example ([N]); convoy keeps at least [N, 1]");
    if (to.size() == 1 && v.shape.size() == 1) {  // rows already: the same values
      Value out = v;
      out.unsqueezed = false;
      out.view.clear();
      values_[n.outputs.at(0)] = out;
      return;
    }
    if (to.size() == 1) {  // an image (or a view of one) to [N, features]: convoy's Flatten
      Value& out = add(n, nn::Flatten{}, {n.inputs[0]}, {}, {}, nullptr, /*reads_nhwc=*/true);
      if (v.nhwc && v.shape[0] > 1 && v.shape[1] * v.shape[2] > 1) out.hwc_image = v.shape;  // else both orders agree
      return;
    }
    if (v.nhwc || !v.hwc_image.empty())
      fail(n, "reshapes NHWC-ordered values to " + with_batch(to) + "; convoy takes them only flattened ([N, features])");
    Value out = v;
    out.unsqueezed = false;
    out.view = to == v.shape ? Shape{} : to;
    values_[n.outputs.at(0)] = out;
  }

  // Transposes between NHWC and NCHW images: convoy's tensors stay NCHW, the
  // value only records which order the ONNX graph sees.
  void transpose(const Node& n) {
    Value out = input(n, n.inputs.at(0));
    const std::vector<int64_t> perm = ints_attr(n, "perm");
    std::vector<int64_t> identity(out.shape.size() + 1);
    for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int64_t>(i);
    if (out.shape.size() == 3 && out.nhwc && perm == std::vector<int64_t>{0, 3, 1, 2})
      out.nhwc = false;
    else if (out.shape.size() == 3 && !out.nhwc && perm == std::vector<int64_t>{0, 2, 3, 1})
      out.nhwc = true;
    else if (perm != identity)
      fail(n, "perm " + list(perm) + " is not supported (only NHWC to NCHW, [0, 3, 1, 2], and back, [0, 2, 3, 1])");
    values_[n.outputs.at(0)] = out;
  }

  // A zero Pad of H and W folds into the padding of the Conv or pool that is
  // its only reader (Keras's ZeroPadding2D before a "valid" layer).
  void pad(const Node& n) {
    const std::string mode = n.find("mode") ? n.find("mode")->s : "constant";
    if (mode != "constant") fail(n, "mode '" + mode + "' is not supported (only zero padding, mode 'constant')");
    const std::optional<std::vector<int64_t>> pads = ints_input(n, 1, "pads");
    if (!pads) fail(n, "the pads are missing");
    float fill = float_attr(n, "value", 0.0f);
    if (const auto c = scalar(n, 2)) fill = *c;
    if (fill != 0.0f) fail(n, "pads with " + std::to_string(fill) + "; only zero padding is supported");
    const Value& v = input(n, n.inputs.at(0));
    if (v.shape.size() != 3 || v.nhwc) fail(n, "only padding of [N, C, H, W] images is supported");
    std::vector<int64_t> full(8, 0);  // begins of N, C, H, W, then their ends
    if (n.inputs.size() > 3 && !n.inputs[3].empty()) {  // opset 18: the axes the pads are for
      const std::vector<int64_t> axes = *ints_input(n, 3, "");
      if (pads->size() != 2 * axes.size()) fail(n, "needs 2 pads per axis");
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const int64_t a = axes[i] < 0 ? axes[i] + 4 : axes[i];
        if (a < 0 || a > 3) fail(n, "axis " + std::to_string(axes[i]) + " is out of range");
        full[static_cast<std::size_t>(a)] = (*pads)[i];
        full[static_cast<std::size_t>(a) + 4] = (*pads)[i + axes.size()];
      }
    } else {
      if (pads->size() != 8) fail(n, "pads must have 8 values for an [N, C, H, W] input");
      full = *pads;
    }
    if (full[0] || full[1] || full[4] || full[5]) fail(n, "pads the batch or channel axis; only H and W can be padded");
    const Pads spatial{full[2], full[3], full[6], full[7]};
    for (int64_t p : spatial) {
      if (p < 0) fail(n, "negative pads (cropping) are not supported");
      if (p > kMaxValues) fail(n, "pads " + list(full) + " are out of range");
    }
    if (spatial == Pads{0, 0, 0, 0}) return alias(n, n.inputs[0]);
    const std::size_t reader = only_consumer(n.outputs.at(0));
    std::string why;
    if (reader == std::string::npos || reader <= current_) {
      why = "it has several readers or none";
    } else {
      const Node& r = m_.graph.nodes[reader];
      const bool own_pads = (r.find("auto_pad") && r.find("auto_pad")->s == "SAME_UPPER") ||
                            std::any_of(r.find("pads") ? r.find("pads")->ints.begin() : full.end(),
                                        r.find("pads") ? r.find("pads")->ints.end() : full.end(), [](int64_t p) { return p != 0; });
      if (r.inputs.empty() || r.inputs[0] != n.outputs[0] ||
          (r.op_type != "Conv" && r.op_type != "MaxPool" && r.op_type != "AveragePool"))
        why = "its reader is not a Conv, MaxPool or AveragePool";
      else if (r.op_type == "MaxPool" && !v.nonnegative)
        why = "the MaxPool's input may be negative, where zeros would win";
      else if (r.op_type == "AveragePool" && int_attr(r, "count_include_pad", 0) == 0 && own_pads)
        why = "the AveragePool leaves its own padding out of the mean but would count the Pad's";
    }
    if (!why.empty())
      fail(n, "zero padding is imported only folded into the Conv, AveragePool or MaxPool (after a ReLU) that reads "
              "it; here " + why);
    folded_pads_[reader] = spatial;
    alias(n, n.inputs[0]);
  }

  // ReduceMean over H and W: a global average pool (Keras's GlobalAveragePooling2D).
  void reduce_mean(const Node& n) {
    const Value& v = input(n, n.inputs.at(0));
    const bool keep = int_attr(n, "keepdims", 1) != 0, nhwc = v.nhwc;
    const auto axes = ints_input(n, 1, "axes");
    const std::vector<int64_t> spatial = nhwc ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 3};
    if (v.shape.size() != 3 || !axes || normalized_axes(*axes, 4) != spatial)
      fail(n, "only ReduceMean over the spatial axes of an image (a global average pool) is supported");
    Value& out = add(n, nn::GlobalAvgPool{.keep_dims = keep}, {n.inputs[0]}, {}, {}, nullptr, /*reads_nhwc=*/true);
    out.nhwc = nhwc && keep;
  }

  // Shape, Gather, Unsqueeze and Concat on shapes: the chain PyTorch writes
  // for x.view(x.size(0), -1) with a free batch size, evaluated here; the
  // batch is kBatch. Only a Reshape may use the result.
  bool is_shape_arithmetic(const Node& n) const {
    if (n.inputs.empty()) return false;
    for (const auto& in : n.inputs) {
      const onnx::Tensor* t = constant(in);
      if (!shape_values_.count(in) && !(t && onnx::is_integer(t->data_type))) return false;
    }
    return true;
  }
  void shape_arithmetic(const Node& n) {
    const std::string& op = n.op_type;
    std::vector<int64_t> out;
    auto shape_input = [&](std::size_t i) -> const std::vector<int64_t>& {
      if (i >= n.inputs.size() || !shape_values_.count(n.inputs[i]))
        fail(n, "is supported only on shapes (Shape, Gather, Unsqueeze, Concat before a Reshape: PyTorch's "
                "x.view(x.size(0), -1))");
      return shape_values_.at(n.inputs[i]);
    };
    if (op == "Shape") {
      const Value& v = input(n, n.inputs.at(0), /*views=*/true);
      if (!v.hwc_image.empty()) fail(n, "the shape of NHWC-ordered features is not supported");
      const Shape dims = dims_of(v);
      out = {kBatch};
      out.insert(out.end(), dims.begin(), dims.end());
      const int64_t rank = static_cast<int64_t>(out.size());
      int64_t start = int_attr(n, "start", 0), end = int_attr(n, "end", rank);  // opset 15
      start = std::clamp(start < 0 ? start + rank : start, int64_t{0}, rank);
      end = std::clamp(end < 0 ? end + rank : end, int64_t{0}, rank);
      out = end > start ? std::vector<int64_t>(out.begin() + start, out.begin() + end) : std::vector<int64_t>{};
    } else if (op == "Gather") {
      const std::vector<int64_t>& from = shape_input(0);
      if (normalized_axis(n, int_attr(n, "axis", 0), 1) != 0) fail(n, "only Gather along axis 0 of a shape is supported");
      const onnx::Tensor& idx = need_integers(n, 1);
      for (int64_t i : idx.int64s) {
        const int64_t size = static_cast<int64_t>(from.size());
        if (i < -size || i >= size) fail(n, "index " + std::to_string(i) + " is out of range");
        out.push_back(from[static_cast<std::size_t>(i < 0 ? i + size : i)]);
      }
    } else if (op == "Unsqueeze") {  // a scalar to a 1-element list: the same values
      out = shape_input(0);
    } else {  // Concat of shapes and int64 constants
      if (normalized_axis(n, int_attr(n, "axis", 0), 1) != 0) fail(n, "only Concat along axis 0 of shapes is supported");
      for (const auto& in : n.inputs) {
        const std::vector<int64_t>& part = shape_values_.count(in) ? shape_values_.at(in) : constant(in)->int64s;
        if (out.size() + part.size() > 64) fail(n, "the shape has more than 64 dimensions");
        out.insert(out.end(), part.begin(), part.end());
      }
    }
    shape_values_[n.outputs.at(0)] = std::move(out);
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
    if (onnx_fold::folds(op) && all_constant(n)) return fold(n);
    if (op == "Identity") return alias(n, n.inputs.at(0));
    if (op == "Dropout") {
      float rate = float_attr(n, "ratio", 0.5f);
      if (auto r = scalar(n, 1)) rate = *r;
      // training_mode (opset 12): true drops values even at inference, which
      // convoy's Dropout does not; with a ratio of 0 it drops nothing.
      if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
        const onnx::Tensor& mode = need_integers(n, 2);
        if (mode.int64s.size() != 1) fail(n, "training_mode must be one bool");
        if (mode.int64s[0] != 0 && rate != 0) fail(n, "training_mode true (dropout at inference) is not supported");
      }
      unread_second_output(n, "mask");
      if (m_.opset < 7 && int_attr(n, "is_test", 0) == 0) fail(n, "is_test 0 (dropout at inference) is not supported");
      return (void)add(n, nn::Dropout{.rate = rate}, {n.inputs.at(0)});
    }
    if (op == "Conv") {
      const Shape& in = image_input(n);
      const onnx::Tensor& w = need_float(n, 1);
      if (w.dims.size() != 4) fail(n, "the weight must be [F, C/groups, k, k]");
      const auto [k, stride] = square_window(n, {w.dims[2], w.dims[3]});
      nn::Conv2d c{.filters = w.dims[0], .kernel = k, .stride = stride, .padding = padding(n, in, k, stride),
                   .groups = int_attr(n, "group", 1), .bias = n.inputs.size() > 2 && !n.inputs[2].empty()};
      LayerWeights lw{.params = {w.floats}};
      if (c.bias) lw.params.push_back(need_float(n, 2).floats);
      return (void)add(n, c, {n.inputs[0]}, std::move(lw), layer_name(w.name));
    }
    if (op == "BatchNormalization") {
      if ((n.outputs.size() > 1 && !n.outputs[1].empty()) || int_attr(n, "training_mode", 0) != 0)
        fail(n, "training-mode batch norm (several outputs, or training_mode 1) is not supported");
      const onnx::Tensor& scale = need_float(n, 1);
      // ONNX's momentum weighs the running statistics (0.9), convoy's the new batch (0.1); the same rule for both.
      const float eps = float_attr(n, "epsilon", 1e-5f), momentum = float_attr(n, "momentum", 0.9f);
      const auto refuse = [&](const char* attr, const char* why, float got) {
        char text[32];  // the shortest text of the float: 1e-05, nan
        fail(n, std::string("'") + attr + "' " + why + ", got " + std::string(text, std::to_chars(text, text + sizeof text, got).ptr));
      };
      if (const char* why = batch_norm_eps_fault(eps)) refuse("epsilon", why, eps);
      if (const char* why = batch_norm_momentum_fault(1.0 - momentum)) refuse("momentum", why, momentum);
      return (void)add(n, nn::BatchNorm{.momentum = 1.0f - momentum, .eps = eps},
                 {n.inputs[0]},
                 {.params = {scale.floats, need_float(n, 2).floats}, .state = {need_float(n, 3).floats, need_float(n, 4).floats}},
                 layer_name(scale.name));
    }
    if (op == "Relu") return (void)add(n, nn::ReLU{}, {n.inputs.at(0)});
    if (op == "Sigmoid") return (void)add(n, nn::Sigmoid{}, {n.inputs.at(0)});
    if (op == "Clip") {
      std::optional<float> lo = scalar(n, 1), hi = scalar(n, 2);
      if (const auto* a = n.find("min")) lo = a->f;
      if (const auto* a = n.find("max")) hi = a->f;
      if (lo == 0.0f && hi == 6.0f) return (void)add(n, nn::ReLU6{}, {n.inputs[0]});
      // No bounds (or infinite ones): the identity.
      if ((!lo || (std::isinf(*lo) && *lo < 0)) && (!hi || (std::isinf(*hi) && *hi > 0))) return alias(n, n.inputs[0]);
      if (lo == 0.0f && (!hi || (std::isinf(*hi) && *hi > 0))) return (void)add(n, nn::ReLU{}, {n.inputs[0]});
      nn::Clip c;  // an absent bound stays infinite
      if (lo) c.min = *lo;
      if (hi) c.max = *hi;
      // ONNX leaves min > max to numpy's clip (every value becomes max), which no layer should mean.
      if (c.min > c.max || std::isnan(c.min) || std::isnan(c.max))
        fail(n, "min " + std::to_string(c.min) + " is above max " + std::to_string(c.max) +
                    " (or one is NaN); convoy's clip takes min <= max");
      return (void)add(n, c, {n.inputs[0]});
    }
    if (op == "Mul" || op == "Add" || op == "Sub" || op == "Div") {
      if (n.inputs.size() != 2) fail(n, "needs two inputs");
      if (constant(n.inputs[0]) || constant(n.inputs[1])) return constant_operand(n, constant(n.inputs[1]) ? 0 : 1);
      if (op == "Sub" || op == "Div") fail(n, op + " of two computed tensors is not supported (only with a constant operand)");
      if (op == "Add") return (void)add(n, nn::Add{}, {n.inputs[0], n.inputs[1]});
      // Element-wise, or a channel gate [N, C, 1, 1] on an image (ONNX's
      // broadcasting allows no other shapes convoy's Multiply takes). It takes
      // the full-size tensor first and the gate second.
      const Value& a = input(n, n.inputs[0]);
      const Value& b = input(n, n.inputs[1]);
      auto gates = [](const Value& image, const Value& gate) {
        return image.shape.size() == 3 && !gate.nhwc &&
               (gate.unsqueezed ? gate.shape == Shape{image.shape[0]} : gate.shape == Shape{image.shape[0], 1, 1});
      };
      const bool swap = gates(b, a);
      if (!swap && !gates(a, b) && (a.shape != b.shape || a.unsqueezed || b.unsqueezed))
        fail(n, "multiplies " + to_string(a.shape) + " by " + to_string(b.shape) +
                    "; convoy imports Mul of equal shapes or of an image by a [N, C, 1, 1] channel gate");
      return (void)add(n, nn::Multiply{}, {n.inputs[swap ? 1 : 0], n.inputs[swap ? 0 : 1]});
    }
    if (op == "Shape" || op == "Gather" || (op == "Concat" && is_shape_arithmetic(n)) ||
        (op == "Unsqueeze" && shape_values_.count(n.inputs[0])))
      return shape_arithmetic(n);
    if (op == "Concat") {
      const int64_t written = int_attr(n, "axis", 1), axis = normalized_axis(n, written, rank_of(input(n, n.inputs.at(0))));
      if (axis == 0)
        fail(n, "axis " + std::to_string(written) + " concatenates along the batch axis; convoy concatenates only channels (axis 1)");
      if (axis != 1) fail(n, "axis " + std::to_string(written) + " is not the channel axis; convoy concatenates only channels (axis 1)");
      return (void)add(n, nn::Concat{}, n.inputs);
    }
    if (op == "MaxPool" || op == "AveragePool") {
      const Shape& in = image_input(n);
      const auto [k, stride] = square_window(n, ints_attr(n, "kernel_shape"));
      const int64_t pad = padding(n, in, k, stride);
      if (int_attr(n, "ceil_mode", 0) != 0) ceil_changes_nothing(n, in, k, stride, pad);
      if (op == "MaxPool") {
        unread_second_output(n, "indices");
        return (void)add(n, nn::MaxPool2d{.kernel = k, .stride = stride, .padding = pad}, {n.inputs[0]});
      }
      // A folded Pad's zeros count in the mean (it only folds where the pool's own pads count too).
      return (void)add(n, nn::AvgPool2d{.kernel = k, .stride = stride, .padding = pad,
                                        .count_include_pad = int_attr(n, "count_include_pad", 0) != 0 ||
                                                             folded_pads_.count(current_) > 0},
                       {n.inputs[0]});
    }
    if (op == "GlobalAveragePool") {
      image_input(n);
      return (void)add(n, nn::GlobalAvgPool{.keep_dims = true}, {n.inputs[0]});
    }
    if (op == "Flatten" || op == "Reshape" || op == "Squeeze") return reshape_like(n);
    if (op == "Transpose") return transpose(n);
    if (op == "Unsqueeze") {
      // [N, C] -> [N, C, 1, 1]: a channel gate for a Mul, as convoy's own export writes it; else a relabelling.
      Value out = input(n, n.inputs.at(0), /*views=*/true);
      const auto axes = ints_input(n, 1, "axes");
      if (out.shape.size() != 1 || !out.view.empty() || !out.hwc_image.empty() || out.unsqueezed || !axes ||
          normalized_axes(*axes, 4) != std::vector<int64_t>{2, 3})
        return reshape_like(n);
      out.unsqueezed = true;
      values_[n.outputs.at(0)] = out;
      return;
    }
    if (op == "Pad") return pad(n);
    if (op == "ReduceMean") return reduce_mean(n);
    if (op == "Softmax") {
      // convoy has no Softmax layer: losses take logits (softmax cross-entropy,
      // or Keras's from_logits) and stay stable. A Softmax that gives the
      // model's output is left out; ImportedModel::softmax_dropped says so.
      const Value& v = input(n, n.inputs.at(0));
      if (v.shape.size() != 1 || !v.hwc_image.empty() || v.unsqueezed ||
          normalized_axis(n, int_attr(n, "axis", m_.opset >= 13 ? -1 : 1), rank_of(v)) != 1)
        fail(n, "only Softmax over the features of [N, features] is supported");
      if (!is_output(n.outputs[0]))
        fail(n, "Softmax is supported only as the model's last op (convoy leaves it out and outputs the logits)");
      softmax_dropped_ = true;
      return alias(n, n.inputs[0]);
    }
    if (op == "Gemm") {
      if (int_attr(n, "transA", 0) != 0) fail(n, "only Gemm with transA 0 is supported");
      const onnx::Tensor& w = need_float(n, 1);
      if (w.dims.size() != 2) fail(n, "the weight must be a matrix");
      std::vector<float> rows = w.floats;  // [units, in] as transB = 1 stores it
      int64_t units = w.dims[0];
      if (int_attr(n, "transB", 0) == 0) {
        units = w.dims[1];
        for (int64_t i = 0; i < w.dims[0]; ++i)
          for (int64_t o = 0; o < units; ++o) rows[static_cast<std::size_t>(o * w.dims[0] + i)] = w.floats[static_cast<std::size_t>(i * units + o)];
      }
      // alpha A B + beta C: alpha scales the weight, beta the bias.
      const float alpha = float_attr(n, "alpha", 1), beta = float_attr(n, "beta", 1);
      if (alpha != 1)
        for (float& v : rows) v *= alpha;
      std::vector<float> bias;
      if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
        bias = bias_for(n, need_float(n, 2), units, rows.size());
        if (beta != 1)
          for (float& v : bias) v *= beta;
      }
      return dense(n, n.inputs[0], std::move(rows), units, std::move(bias), w.name);
    }
    if (op == "MatMul") {
      const onnx::Tensor& w = need_float(n, 1);
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
        if (constant(other)) {
          skip_.insert(next);
          std::vector<float> bias = bias_for(a, need_float(a, a.inputs[0] == other ? 0 : 1), units, rows.size());
          return dense(n, n.inputs[0], std::move(rows), units, std::move(bias), w.name, &a.outputs.at(0));
        }
      }
      return dense(n, n.inputs[0], std::move(rows), units, {}, w.name);
    }
    if (op == "LogSoftmax") {
      const Value& v = input(n, n.inputs.at(0));
      if (v.shape.size() != 1 || v.unsqueezed || normalized_axis(n, int_attr(n, "axis", m_.opset >= 13 ? -1 : 1), rank_of(v)) != 1)
        fail(n, "only LogSoftmax over the features of [N, features] is supported");
      return (void)add(n, nn::LogSoftmax{}, {n.inputs[0]});
    }
    throw UserError(where_ + ": " + (n.name.empty() ? "node #" + std::to_string(current_) : "node '" + shown(n.name) + "'") + " has op " + shown(op) +
                    ", which convoy cannot import (it imports " + kSupported + ")");
  }

  const onnx::Model& m_;
  std::string where_;
  std::map<std::string, const onnx::Tensor*> constants_;
  std::deque<onnx::Tensor> owned_;  // Constant nodes' tensors; a deque keeps pointers stable
  int64_t folded_values_ = 0;       // values fold() has made so far (see fold)
  int64_t fold_budget_ = onnx_fold::kMaxFoldedValues;  // 2^26 plus the initializers' values (see fold)
  std::map<std::string, Value> values_;
  std::set<std::size_t> skip_;  // nodes fused into an earlier one
  std::set<std::string> used_names_;
  std::optional<nn::GraphBuilder> builder_;
  std::vector<LayerWeights> weights_;  // one per layer added
  std::vector<bool> is_dense_;         // one per layer added through add()
  std::vector<bool> is_affine_;        // likewise
  std::vector<std::string> layer_output_;  // likewise: the tensor each computes
  std::vector<std::string> frozen_;    // layers holding constants (see constant_operand)
  int layer_count_ = 0;
  std::size_t current_ = 0;                  // the node being imported
  std::map<std::size_t, Pads> folded_pads_;  // by reader node: the Pad folded into its padding
  bool input_nhwc_ = false, softmax_dropped_ = false;
  int64_t batch_ = -1;  // the input's batch size when the file fixes one, else -1
  std::map<std::string, std::vector<int64_t>> shape_values_;  // computed shapes (see shape_arithmetic)
};

}  // namespace

ImportedModel from_onnx(const onnx::Model& onnx, const std::string& where) { return Importer(onnx, where).run(); }

ImportedModel load_onnx(const std::string& path) {
  return from_onnx(onnx::decode(read_file_bounded(path, kMaxModelBytes, "ONNX file"), path), path);
}

}  // namespace convoy::io
