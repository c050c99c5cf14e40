#pragma once
// A Keras-like Sequential model: an input shape and a list of layers. Building
// one infers every shape and lays every parameter out in one flat buffer
// (PyTorch's parameter order), so backends can update, reduce and save all
// parameters in one pass.
#include <cstdint>
#include <string>
#include <vector>

#include "convoy/nn/layers.h"

namespace convoy::nn {

class Sequential {
 public:
  Sequential(Shape input_shape, std::vector<Layer> layers);

  const Shape& input_shape() const { return input_shape_; }
  const Shape& output_shape() const;
  const std::vector<LayerPlan>& layers() const { return plans_; }
  int64_t num_parameters() const { return num_params_; }
  int64_t num_state() const { return num_state_; }

  // Fresh parameters with PyTorch's default initialisation (uniform in
  // +-1/sqrt(fan_in) for conv and dense weights and biases; BN scale 1, shift 0),
  // drawn from convoy's own seeded RNG.
  std::vector<float> initial_parameters(uint64_t seed) const;
  // Fresh state: BN running mean 0, running variance 1.
  std::vector<float> initial_state() const;

  // A Keras-style table: layer, output shape, parameter count.
  std::string summary() const;

 private:
  Shape input_shape_;
  std::vector<LayerPlan> plans_;
  int64_t num_params_ = 0;
  int64_t num_state_ = 0;
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
Sequential seed_cnn();

}  // namespace convoy::nn
