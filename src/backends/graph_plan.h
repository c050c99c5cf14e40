#pragma once
// Memory planning of a model's layer graph for one batch size, shared by the
// backends: where every activation and every gradient lives in one arena, and
// which gradient sums must run before which backward step. A backend turns
// the offsets into pointers once it has allocated the arena.
//
// Activation a = 0 is the model input, a = i + 1 is layer i's output. Each
// activation has a gradient buffer (the input only when its gradient is
// wanted). An activation read by several layers (a residual branch) gets one
// gradient buffer per reading edge, so every backward step can overwrite its
// output instead of accumulating; those buffers are summed into the
// activation's own gradient right before the backward step of the layer that
// produced it (for the input: after the whole backward pass). Views (an
// output that is its input reinterpreted, such as Flatten) share their
// input's memory and gradient.
#include <cstdint>
#include <vector>

#include "convoy/nn/model.h"

namespace convoy {

struct GradientSum {
  int64_t into = -1;            // the activation's gradient
  std::vector<int64_t> parts;   // one buffer per reading edge; empty: nothing to sum
  int64_t elements = 0;
};

struct GraphPlan {
  std::vector<int64_t> activation;  // per activation: offset in floats
  std::vector<int64_t> gradient;    // per activation: offset, or -1 when no gradient is wanted
  std::vector<int64_t> elements;    // per activation: floats, batch included
  // Per layer, per input: where the backward step writes that input's
  // gradient (-1: not wanted).
  std::vector<std::vector<int64_t>> input_gradient;
  std::vector<GradientSum> sums;    // per activation
  int64_t floats = 0;               // arena size
};

// views[i]: layer i's output is its (single) input reinterpreted. Every
// buffer starts at a multiple of `align_floats`.
GraphPlan plan_graph(const nn::Model& model, int64_t batch, bool input_gradient, const std::vector<bool>& views,
                     int64_t align_floats);

}  // namespace convoy
