#pragma once
// A model: an input shape and layers in a directed acyclic graph, built
// either as a Keras Sequential (a list of layers, each taking the previous
// one's output) or with the functional API (GraphBuilder: each layer names
// its inputs, so residual adds and concats join branches). Building one
// infers every shape and lays every parameter out in one flat buffer
// (PyTorch's parameter order), so backends can update, reduce and save all
// parameters in one pass.
//
//   nn::GraphBuilder g({64, 8, 8});
//   auto x = g.input();
//   auto y = g.add(nn::Conv2d{.filters = 64, .kernel = 3, .padding = 1}, x);
//   y = g.add(nn::ReLU{}, y);
//   auto sum = g.add(nn::Add{}, {x, y});          // the residual join
//   nn::Model m = g.build();                      // the last layer is the output
//
// Layers are named after their kind ("conv2d_0", "relu_3") unless given a
// name, e.g. torchvision's "layer1.0.conv1", so that parameter names
// ("layer1.0.conv1.weight") match a PyTorch state dict one to one.
#include <cstdint>
#include <string>
#include <vector>

#include "convoy/nn/layers.h"

namespace convoy::nn {

// One layer of a graph: what it is, where its inputs come from (indices of
// earlier nodes, or kModelInput), and optionally its name.
struct Node {
  Layer layer;
  std::vector<int> inputs;
  std::string name = {};  // empty: kind and a count, "conv2d_0"
  bool trainable = true;
};

class Model {
 public:
  // Sequential: each layer takes the previous one's output.
  Model(Shape input_shape, std::vector<Layer> layers);
  // A graph: nodes in topological order. The last one is the model's output;
  // every other one must feed some later one. Names must be unique.
  Model(Shape input_shape, std::vector<Node> graph);

  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const;
  const std::vector<LayerPlan>& layers() const { return plans_; }
  int64_t num_parameters() const { return num_params_; }
  // Of those, the ones in trainable layers: what an optimizer updates and keeps state for.
  int64_t num_trainable_parameters() const;
  int64_t num_state() const { return num_state_; }

  // Fresh parameters with PyTorch's default initialisation (uniform in
  // +-1/sqrt(fan_in) for conv and dense weights and biases; BN scale 1, shift 0),
  // drawn from convoy's own seeded RNG.
  std::vector<float> initial_parameters(uint64_t seed) const;
  // Fresh state: BN running mean 0, running variance 1.
  std::vector<float> initial_state() const;

  // A Keras-style table: layer, output shape, parameter count (and, for
  // graphs, what each layer takes its input from).
  std::string summary() const;
  bool is_chain() const;  // every layer takes the previous one's output

  // Freezes (false) or unfreezes the layers whose name is `prefix` or starts
  // with `prefix` + "." (every layer for an empty prefix): see
  // LayerPlan::trainable. Applies to executables compiled afterwards; throws
  // UserError when no layer matches. Returns how many layers changed.
  int set_trainable(bool trainable, const std::string& prefix = "");
  // The layer named `name`, or nullptr.
  const LayerPlan* find_layer(const std::string& name) const;

 private:
  Shape input_shape_;
  std::vector<LayerPlan> plans_;
  int64_t num_params_ = 0;
  int64_t num_state_ = 0;
};

using Sequential = Model;  // Keras's name for a chain of layers

// Floats of activations a training step holds per example: each layer's
// output and its gradient, plus the input twice (staged for the backend).
// What the memory checks before training count (app/preflight.cpp, the CPU
// backend's batch check).
double activation_floats(const LayerPlan& plan);
double activation_floats(const Model& model);

// The functional API: add layers one by one, each naming its inputs.
class GraphBuilder {
 public:
  struct Ref {
    int index = kModelInput;
  };
  explicit GraphBuilder(Shape input_shape) : input_shape_(std::move(input_shape)) {}
  Ref input() const { return {kModelInput}; }
  // `name`: see Model; empty for the default.
  Ref add(Layer layer, Ref in, std::string name = {}) { return add(std::move(layer), std::vector<Ref>{in}, std::move(name)); }
  Ref add(Layer layer, std::vector<Ref> ins, std::string name = {});
  Model build() const;  // the last layer added is the output

 private:
  Shape input_shape_;
  std::vector<Node> graph_;
};

// Floating-point operations of one layer for one example (a multiply-add
// counts 2), forward and backward (gradients for the input and the weights).
struct LayerFlops {
  double forward = 0, backward = 0;
};
LayerFlops layer_flops(const LayerPlan& plan);

// The network of the PyTorch/XLA Fashion-MNIST article (seeds/002): conv 1->10
// k5, max-pool 2, ReLU, BN, conv 10->20 k5, max-pool 2, ReLU, BN, flatten,
// dense 320->50, ReLU, dense 50->10, log-softmax.
Model seed_cnn();

}  // namespace convoy::nn
