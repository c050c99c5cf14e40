#pragma once
// Maps a model's flat parameter and state buffers to named tensors
// ("conv2d_0.weight", "batch_norm_0.running_mean", ...) and back, for weight
// files and fixtures.
#include <span>
#include <vector>

#include "convoy/io/safetensors.h"
#include "convoy/nn/model.h"

namespace convoy::io {

NamedTensors to_named(const nn::Model& model, std::span<const float> params, std::span<const float> state);

struct FlatWeights {
  std::vector<float> params, state;
};
// Throws UserError naming `what` and the first missing or mis-shaped tensor.
FlatWeights from_named(const nn::Model& model, const NamedTensors& named, const std::string& what);

// Every weight file's tensors pass here on their way into a model (model
// files, checkpoints, model.pretrained, ONNX imports). A NaN or infinite
// weight trains nothing and says nothing: a NaN convolution behind a ReLU
// gives zeros and finite gradients, so the numerical guard never fires and
// the run ends at chance accuracy. Throws UserError naming `what`, the tensor
// and the first bad value's position.
void require_finite_weights(std::span<const float> values, const std::string& what, const std::string& tensor);

}  // namespace convoy::io
