#pragma once
// Layers are descriptions, not code: a model is a list of these, and a backend
// turns each one into kernels when the model is compiled. Shapes here never
// include the batch dimension: images are [C, H, W], vectors [features].
#include <cstdint>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "convoy/core/tensor.h"

namespace convoy::nn {

// A padding value meaning Keras's (TensorFlow's) "same": the output has
// ceil(size / stride) positions and the padding this needs is split evenly,
// an odd one going to the end (bottom, right). For stride 1 it is PyTorch's
// padding="same".
inline constexpr int64_t kSame = -1;

// 2-D convolution over [C, H, W]; the input channel count comes from the input.
// With groups > 1 the input and output channels split into that many groups,
// each convolved on its own (groups == C == filters is a depthwise convolution);
// the weight is [filters, C / groups, k, k], as PyTorch's.
struct Conv2d {
  int64_t filters;
  int64_t kernel;
  int64_t stride = 1;
  int64_t padding = 0;  // zeros on each side, or kSame
  int64_t groups = 1;
  bool bias = true;  // false before a batch norm (torchvision's ResNets, MobileNets)
};

// Max over kernel x kernel windows; stride defaults to the kernel size. Padding
// never wins (it counts as -infinity), at most half the kernel as PyTorch's.
inline constexpr int64_t kMaxPoolLargestKernel = 16;  // larger windows are refused when the model is built
struct MaxPool2d {
  int64_t kernel;
  int64_t stride = 0;
  int64_t padding = 0;  // or kSame
};

// Mean over kernel x kernel windows; stride defaults to the kernel size.
// count_include_pad (PyTorch's default) divides by the whole window, padding
// included; otherwise by the pixels inside the image (TensorFlow's "same").
struct AvgPool2d {
  int64_t kernel;
  int64_t stride = 0;
  int64_t padding = 0;  // or kSame
  bool count_include_pad = true;
};

// Mean over all pixels: [C, H, W] -> [C] (torch's adaptive_avg_pool2d(x, 1)
// then flatten), or [C, 1, 1] with keep_dims (for 1x1 convolutions after it,
// as in squeeze-and-excitation blocks).
struct GlobalAvgPool {
  bool keep_dims = false;
};

// Training: zeroes each element with probability `rate` and scales the rest
// by 1 / (1 - rate), with a fresh mask every training step (drawn from
// convoy's seeded Rng: same seed, same masks). Inference: the identity.
struct Dropout {
  float rate = 0.5f;
};

struct ReLU {};
struct ReLU6 {};    // min(max(x, 0), 6)
struct SiLU {};     // x * sigmoid(x), also called swish
struct Sigmoid {};  // 1 / (1 + exp(-x))

// min(max(x, min), max), PyTorch's clamp: either bound may be infinite (absent).
// The gradient passes where min <= x <= max, bounds included as clamp's
// (ReLU6 is hardtanh's: 0 < x < 6, bounds excluded). NaN stays NaN.
struct Clip {
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
};

// x * weight + bias element by element, weight and bias of the input's shape
// (one example's): ONNX's x op C with a constant C of that shape, imported
// frozen. Trainable like any layer; starts as the identity (weight 1, bias 0).
struct Affine {};

// Batch normalisation over the channel axis (dim 0 of [C, H, W] or [features]).
// Training mode normalises with the batch's statistics and updates running
// averages as PyTorch does (unbiased variance, momentum 0.1); inference mode
// uses the running averages. A frozen batch norm (trainable = false on its
// layer) always uses the running averages and leaves them alone, as Keras's.
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
// Two inputs: x times a gate, either of x's shape (element-wise) or one value
// per channel ([C] or [C, 1, 1] for an image x: squeeze-and-excitation).
struct Multiply {};

using Layer = std::variant<Conv2d, MaxPool2d, AvgPool2d, GlobalAvgPool, Dropout, ReLU, ReLU6, SiLU, Sigmoid,
                           BatchNorm, Flatten, Dense, LogSoftmax, Add, Concat, Multiply, Clip, Affine>;

// How many inputs a layer takes: 1, 2, or kManyInputs (two or more) for joins.
inline constexpr int kManyInputs = -1;
int arity(const Layer& layer);

// Where a kernel sliding over one spatial axis lands: `out` positions, and
// the padding before and after the input. Throws UserError naming the layer
// when the kernel does not fit.
struct Window {
  int64_t out = 0, pad_begin = 0, pad_end = 0;
};
Window window(int64_t size, int64_t kernel, int64_t stride, int64_t padding, const std::string& layer_name);

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
  // false: the parameters stay as they are (no gradient, no update) and a
  // batch norm uses its running statistics (transfer learning's frozen backbone).
  bool trainable = true;
};
inline constexpr int kModelInput = -1;

const char* kind_name(const Layer& layer);
// Output shape for a given input shape; throws UserError naming the layer when
// the input does not fit (wrong rank, kernel larger than the image, ...).
Shape output_shape(const Layer& layer, const Shape& input, const std::string& layer_name);
// The same for any number of inputs (joins check that theirs agree).
Shape output_shape(const Layer& layer, const std::vector<Shape>& inputs, const std::string& layer_name);

}  // namespace convoy::nn
