#pragma once
// Random model definitions that are not the zoo's, as a user writes them in a
// run config's model.layers (docs: README's model.layers; src/config/layer_config.cpp):
// every layer kind the config accepts, with their options drawn (conv kernel
// 1..7, stride 1..3, padding 0..3 or "same", groups, bias on and off; max and
// average pools with their kernel/stride/padding and count_include_pad;
// batch norm, dropout, every activation, dense, flatten, global pools;
// residual adds, concats and squeeze-excitation gates), gray and RGB inputs
// of odd sizes (13x17, 5x19, down to 1x1 after pooling). Deterministic: model
// `index` is the same on every machine. Each layer is drawn until
// nn::output_shape accepts it, so every model is valid; invalid_models() are
// the faults a user writes (shapes that collapse to 0, joins that disagree).
// tests/test_held_out_models.cpp runs them end to end; the same cases feed
// tests/held_out_peers.py (ONNX Runtime, PyTorch) and tests/held_out_cli.sh.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/layer_config.h"
#include "convoy/core/error.h"
#include "convoy/core/rng.h"
#include "convoy/nn/layers.h"

namespace convoy::testing {

struct HeldOutModel {
  std::string name;      // "held_out_7"
  Shape input;           // [C, H, W]
  int64_t classes = 0;   // the outputs of layers[classes_layer] (its units or filters)
  nlohmann::json layers; // model.layers as a config holds it
  std::size_t classes_layer = 0;
};

// Models from this index on end fully convolutional (SqueezeNet's head: a
// 1x1 convolution to the classes, then a global pool), the others in dense layers.
inline constexpr int kFirstConvolutionalHead = 24;

namespace held_out_detail {

// Draws layers for one model, keeping the names (kind_N) and shapes of what it
// has added so that joins can name their inputs.
class Drawer {
 public:
  Drawer(uint64_t seed, Shape input) : rng_(seed), shape_(std::move(input)) {}

  int64_t pick(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng_.below(static_cast<uint64_t>(hi - lo + 1))); }
  bool coin(int percent = 50) { return static_cast<int>(rng_.below(100)) < percent; }
  const Shape& shape() const { return shape_; }
  const std::string& last() const { return last_; }

  // Adds `j` reading `inputs` (empty: the layer before) if nn::output_shape
  // accepts it; returns its name, or "" (nothing added) when it does not fit.
  std::string add(nlohmann::json j, const std::vector<std::string>& inputs = {}) {
    std::vector<Shape> in;
    for (const auto& name : inputs) in.push_back(shapes_.at(name));
    if (inputs.empty()) in.push_back(shape_);
    const std::string kind = j.at("type").get<std::string>();
    const std::string name = kind + "_" + std::to_string(counts_[kind]);
    try {  // the config's own reader, so that the generator and the config agree
      const nn::Layer layer = train::layers_from_json(nlohmann::json::array({j}), "held-out model")[0].layer;
      shape_ = nn::output_shape(layer, in, name);
    } catch (const UserError&) {
      return "";
    }
    if (!inputs.empty()) j["inputs"] = inputs;
    ++counts_[kind];
    shapes_[name] = shape_;
    last_ = name;
    layers_.push_back(std::move(j));
    return name;
  }
  void mark_input() { shapes_["input"] = shape_; last_ = "input"; }
  nlohmann::json take() { return std::move(layers_); }

 private:
  Rng rng_;
  Shape shape_;
  std::string last_;
  std::map<std::string, int> counts_;
  std::map<std::string, Shape> shapes_;
  nlohmann::json layers_ = nlohmann::json::array();
};

inline nlohmann::json padding_value(Drawer& d) {
  if (d.coin(20)) return "same";
  return d.pick(0, 3);
}

inline void conv(Drawer& d, int64_t filters = 0) {
  for (int tries = 0; tries < 20; ++tries) {
    const int64_t c = d.shape()[0];
    int64_t groups = 1;
    if (d.coin(25)) groups = d.coin() ? c : (c % 2 == 0 ? 2 : 1);  // depthwise or two groups
    int64_t f = filters ? filters : d.pick(1, 6) * groups;
    if (f % groups != 0) groups = 1;
    nlohmann::json j{{"type", "conv2d"}, {"filters", f}, {"kernel", d.pick(1, 7)}};
    if (d.coin(60)) j["stride"] = d.pick(1, 3);
    j["padding"] = padding_value(d);
    if (groups > 1) j["groups"] = groups;
    if (d.coin(30)) j["bias"] = false;
    if (!d.add(j).empty()) return;
  }
}

inline void pool(Drawer& d) {
  for (int tries = 0; tries < 20; ++tries) {
    const bool max = d.coin();
    const int64_t kernel = d.pick(1, 4);
    nlohmann::json j{{"type", max ? "max_pool2d" : "avg_pool2d"}, {"kernel", kernel}};
    if (d.coin(60)) j["stride"] = d.pick(1, 3);
    if (d.coin(50)) j["padding"] = d.coin(25) ? nlohmann::json("same") : nlohmann::json(d.pick(0, kernel / 2));
    if (!max && d.coin(40)) j["count_include_pad"] = false;
    if (!d.add(j).empty()) return;
  }
}

inline void activation(Drawer& d) {
  switch (d.pick(0, 6)) {
    case 0: d.add({{"type", "relu"}}); break;
    case 1: d.add({{"type", "relu6"}}); break;
    case 2: d.add({{"type", "silu"}}); break;
    case 3: d.add({{"type", "sigmoid"}}); break;
    case 4: d.add({{"type", "clip"}, {"min", -0.5}, {"max", 0.75}}); break;
    case 5: d.add(d.coin() ? nlohmann::json{{"type", "clip"}, {"min", 0}} : nlohmann::json{{"type", "clip"}, {"max", 0.5}}); break;
    default: d.add({{"type", "affine"}}); break;
  }
}

// One block on an image: a plain layer, or a join.
inline void image_block(Drawer& d) {
  const std::string before = d.last();
  switch (d.pick(0, 9)) {
    case 0: case 1: conv(d); break;
    case 2: pool(d); break;
    case 3: d.add({{"type", "batch_norm"}}); break;
    case 4: d.add({{"type", "dropout"}, {"rate", 0.25}}); break;
    case 5: activation(d); break;
    case 6: {  // residual: a same-shaped branch added to its input
      const Shape keep = d.shape();
      d.add({{"type", "conv2d"}, {"filters", keep[0]}, {"kernel", d.coin() ? 3 : 1}, {"padding", "same"}, {"bias", d.coin()}});
      d.add({{"type", "batch_norm"}});
      d.add({{"type", "add"}}, {before, d.last()});
      break;
    }
    case 7: {  // concat of two branches of one size
      const std::string a = d.add({{"type", "conv2d"}, {"filters", d.pick(1, 4)}, {"kernel", 3}, {"padding", 1}}, {before});
      const std::string b = d.add({{"type", "conv2d"}, {"filters", d.pick(1, 4)}, {"kernel", 1}}, {before});
      d.add({{"type", "concat"}}, {a, b});
      break;
    }
    case 8: {  // squeeze-excitation: a per-channel gate
      const int64_t c = d.shape()[0];
      d.add({{"type", "global_avg_pool"}, {"keep_dims", true}});
      d.add({{"type", "conv2d"}, {"filters", std::max<int64_t>(1, c / 2)}, {"kernel", 1}});
      d.add({{"type", "relu"}});
      d.add({{"type", "conv2d"}, {"filters", c}, {"kernel", 1}});
      d.add({{"type", "sigmoid"}});
      d.add({{"type", "multiply"}}, {before, d.last()});
      break;
    }
    default: conv(d); activation(d); break;
  }
}

}  // namespace held_out_detail

// Model `index` of the held-out set.
inline HeldOutModel held_out_model(int index) {
  using namespace held_out_detail;
  Rng shape_rng(0x4E1D0000ull + static_cast<uint64_t>(index));
  const int64_t channels = shape_rng.below(2) ? 3 : 1;
  const int64_t h = 5 + static_cast<int64_t>(shape_rng.below(16)), w = 5 + static_cast<int64_t>(shape_rng.below(16));
  Drawer d(0xC0DE0000ull + static_cast<uint64_t>(index), {channels, h, w});
  d.mark_input();
  const int64_t blocks = d.pick(1, 5);
  for (int64_t b = 0; b < blocks; ++b) image_block(d);
  if (index >= kFirstConvolutionalHead) {
    const int64_t classes = d.pick(2, 5);
    d.add({{"type", "conv2d"}, {"filters", classes}, {"kernel", 1}});
    nlohmann::json layers = d.take();
    const std::size_t at = layers.size() - 1;
    layers.push_back({{"type", "global_avg_pool"}});
    if (d.coin(40)) layers.push_back({{"type", "log_softmax"}});
    return {"held_out_" + std::to_string(index), {channels, h, w}, classes, std::move(layers), at};
  }
  // The head: flatten, or a global pool (kept [C, 1, 1] through a 1x1 conv).
  if (d.coin()) {
    d.add({{"type", "flatten"}});
  } else if (d.coin()) {
    d.add({{"type", "global_avg_pool"}});
  } else {
    d.add({{"type", "global_avg_pool"}, {"keep_dims", true}});
    d.add({{"type", "conv2d"}, {"filters", d.pick(2, 5)}, {"kernel", 1}});
    d.add({{"type", "flatten"}});
  }
  if (d.coin()) {  // a hidden dense layer, its activation, maybe a 1-d batch norm and dropout
    d.add({{"type", "dense"}, {"units", d.pick(3, 8)}});
    if (d.coin()) d.add({{"type", "batch_norm"}});
    activation(d);
    if (d.coin(30)) d.add({{"type", "dropout"}, {"rate", 0.5}});
    if (d.coin(30)) {  // vector joins
      const std::string a = d.last();
      d.add({{"type", "dense"}, {"units", d.shape()[0]}});
      d.add({{"type", "add"}}, {a, d.last()});
    }
  }
  const int64_t classes = d.pick(2, 5);
  d.add({{"type", "dense"}, {"units", classes}});
  nlohmann::json layers = d.take();
  const std::size_t at = layers.size() - 1;
  if (d.coin(40)) layers.push_back({{"type", "log_softmax"}});
  return {"held_out_" + std::to_string(index), {channels, h, w}, classes, std::move(layers), at};
}

// Models a user may write that no shape fits: each with the words its one
// error line must hold (the layer's name, and what is wrong). Images of 8
// pixels a side or more, as image data can be resized to (held_out_cli.sh).
struct InvalidModel {
  std::string name;
  Shape input;
  nlohmann::json layers;
  std::vector<std::string> says;
};

inline std::vector<InvalidModel> invalid_models() {
  using nlohmann::json;
  return {
      {"kernel larger than the image", {1, 8, 8},
       json::parse(R"([{"type": "conv2d", "filters": 2, "kernel": 9}, "flatten", {"type": "dense", "units": 2}])"),
       {"conv2d_0", "kernel 9 does not fit input size 8"}},
      {"pools collapse the image to 0", {3, 13, 17},
       json::parse(R"([{"type": "max_pool2d", "kernel": 4}, {"type": "max_pool2d", "kernel": 4},
                      "flatten", {"type": "dense", "units": 2}])"),
       {"max_pool2d_1", "does not fit input size 3"}},
      {"add of different channel counts", {3, 8, 8},
       json::parse(R"([{"type": "conv2d", "filters": 4, "kernel": 1}, {"type": "add", "inputs": ["input", "conv2d_0"]},
                      "flatten", {"type": "dense", "units": 2}])"),
       {"add_0", "adds inputs of one shape"}},
      {"concat of different sizes", {1, 9, 9},
       json::parse(R"([{"type": "conv2d", "filters": 2, "kernel": 3}, {"type": "concat", "inputs": ["input", "conv2d_0"]},
                      "flatten", {"type": "dense", "units": 2}])"),
       {"concat_0", "the other dimensions must agree"}},
      {"groups that do not divide the channels", {3, 8, 8},
       json::parse(R"([{"type": "conv2d", "filters": 4, "kernel": 3, "groups": 2}, "flatten", {"type": "dense", "units": 2}])"),
       {"conv2d_0", "must divide the input channels (3)"}},
      {"dense on an image", {1, 8, 8},
       json::parse(R"([{"type": "dense", "units": 2}])"), {"dense_0", "expects a [features] input"}},
      {"pool padding over half its kernel", {1, 8, 8},
       json::parse(R"([{"type": "avg_pool2d", "kernel": 2, "padding": 2}, "flatten", {"type": "dense", "units": 2}])"),
       {"avg_pool2d_0", "more than half the kernel", "use a padding of at most 1"}},
      {"max pool window above 16", {1, 20, 20},
       json::parse(R"([{"type": "max_pool2d", "kernel": 17}, "flatten", {"type": "dense", "units": 2}])"),
       {"max_pool2d_0", "kernel 17 is above 16", "use a kernel of at most 16"}},
      {"join of an unknown layer", {1, 8, 8},
       json::parse(R"([{"type": "conv2d", "filters": 1, "kernel": 1}, {"type": "add", "inputs": ["input", "conv2d_7"]},
                      "flatten", {"type": "dense", "units": 2}])"),
       {"model.layers[1].inputs", "no earlier layer is named 'conv2d_7'"}},
  };
}

}  // namespace convoy::testing
