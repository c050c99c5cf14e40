#pragma once
// SGD with momentum, PyTorch's semantics (torch.optim.SGD, dampening 0):
//   g = grad + weight_decay * p
//   v = momentum * v + g            (v starts at 0, so the first v is g)
//   p -= lr * (nesterov ? g + momentum * v : v)
// One fused pass over the flat parameter, gradient and velocity buffers.
#include <span>

namespace convoy::optim {

struct SgdOptions {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  bool nesterov = false;
};

void sgd_update(std::span<float> params, std::span<const float> grads, std::span<float> velocity,
                const SgdOptions& opt);

}  // namespace convoy::optim
