#pragma once
// Layers are descriptions, not code: a model is a list of these, and a backend
// turns each one into kernels when the model is compiled. Shapes here never
// include the batch dimension: images are [C, H, W], vectors [features].
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "convoy/core/tensor.h"

namespace convoy::nn {

// 2-D convolution over [C, H, W]; the input channel count comes from the input.
struct Conv2d {
  int64_t filters;
  int64_t kernel;
  int64_t stride = 1;
  int64_t padding = 0;
};

// Max over kernel x kernel windows; stride defaults to the kernel size.
struct MaxPool2d {
  int64_t kernel;
  int64_t stride = 0;
};

struct ReLU {};

// Batch normalisation over the channel axis (dim 0 of [C, H, W] or [features]).
// Training mode normalises with the batch's statistics and updates running
// averages as PyTorch does (unbiased variance, momentum 0.1); inference mode
// uses the running averages.
struct BatchNorm {
  float momentum = 0.1f;
  float eps = 1e-5f;
};

// [C, H, W] -> [C*H*W] in C-major order, as torch.flatten(x, 1).
struct Flatten {};

// Fully connected: y = x W^T + b with W of shape [units, in_features].
struct Dense {
  int64_t units;
};

// log(softmax(x)) over the feature axis of a [features] input.
struct LogSoftmax {};

// Layers with several inputs (the functional API's joins).
// Element-wise sum of inputs of one shape: a residual connection.
struct Add {};
// Concatenation along the channel axis (dim 0 of [C, H, W] or [features]);
// the other dimensions must agree.
struct Concat {};

using Layer = std::variant<Conv2d, MaxPool2d, ReLU, BatchNorm, Flatten, Dense, LogSoftmax, Add, Concat>;

// How many inputs a layer takes: 1, or kManyInputs (two or more) for joins.
inline constexpr int kManyInputs = -1;
int arity(const Layer& layer);

// A learned tensor (or a non-learned state tensor such as a running mean)
// and where it lives in its model's flat buffer.
struct ParamSlot {
  std::string name;  // e.g. "conv2d_0.weight"
  Shape shape;
  int64_t offset = 0;  // in floats, into the flat parameter (or state) buffer
  int64_t size() const { return numel(shape); }
};

// Everything a backend needs to know about one layer once shapes are known.
struct LayerPlan {
  std::string name;  // e.g. "conv2d_0"
  Layer layer;
  Shape input_shape;   // without batch; the first input's for joins
  Shape output_shape;  // without batch
  std::vector<ParamSlot> params;  // learned, in PyTorch's order (weight, bias)
  std::vector<ParamSlot> state;   // not learned (running mean, running var)
  // Where the inputs come from: indices of earlier layers in the model's
  // list, kModelInput for the model's input. A chain has {i - 1}.
  std::vector<int> inputs;
  std::vector<Shape> input_shapes;  // one per input, without batch
};
inline constexpr int kModelInput = -1;

const char* kind_name(const Layer& layer);
// Output shape for a given input shape; throws UserError naming the layer when
// the input does not fit (wrong rank, kernel larger than the image, ...).
Shape output_shape(const Layer& layer, const Shape& input, const std::string& layer_name);
// The same for any number of inputs (joins check that theirs agree).
Shape output_shape(const Layer& layer, const std::vector<Shape>& inputs, const std::string& layer_name);

}  // namespace convoy::nn
