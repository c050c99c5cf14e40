#pragma once
// Optimizers with PyTorch's semantics, each one fused pass over the flat
// parameter, gradient and state buffers (no allocation, one loop).
//   sgd:     g += wd*p; v = mu*v + g; p -= lr * (nesterov ? g + mu*v : v)
//   adam:    g += wd*p; m = b1*m + (1-b1)*g; s = b2*s + (1-b2)*g^2;
//            p -= lr * (m / (1-b1^t)) / (sqrt(s / (1-b2^t)) + eps)
//   adamw:   p *= 1 - lr*wd (decoupled decay), then adam without wd
//   rmsprop: g += wd*p; s = a*s + (1-a)*g^2; d = g / (sqrt(s) + eps);
//            with momentum: b = mu*b + d, p -= lr*b; else p -= lr*d
// With clip_norm > 0 the gradients are first scaled (in place) so that their
// global L2 norm is at most clip_norm, as torch.nn.utils.clip_grad_norm_.
#include <cstdint>
#include <span>
#include <string>

#include "convoy/optim/optimizer_options.h"

namespace convoy::optim {

// "sgd", "adam", "adamw", "rmsprop"; throws UserError listing them otherwise.
Kind parse_kind(const std::string& name);
const char* kind_name(Kind kind);

// Floats of optimizer state for `params` parameters (sgd: velocity; adam:
// first and second moments and the step count; rmsprop: square average and
// momentum buffer).
int64_t state_size(const OptimizerOptions& opt, int64_t params);

// One update of every parameter.
void step(const OptimizerOptions& opt, std::span<float> params, std::span<float> grads, std::span<float> state);

}  // namespace convoy::optim
