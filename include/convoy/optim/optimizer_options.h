#pragma once
// What an optimizer is (optimizer.h has the update rules). Plain C++ with no
// other headers, so every device's optimizer kernels (nvcc included) read
// the same struct.
#include <cstdint>

namespace convoy::optim {

enum class Kind { sgd, adam, adamw, rmsprop };

struct OptimizerOptions {
  Kind kind = Kind::sgd;
  float lr = 0.01f;
  float momentum = 0.0f;  // sgd, rmsprop
  float weight_decay = 0.0f;
  bool nesterov = false;  // sgd
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw; eps also rmsprop
  float alpha = 0.99f;    // rmsprop's smoothing constant
  float clip_norm = 0.0f;
};

}  // namespace convoy::optim
