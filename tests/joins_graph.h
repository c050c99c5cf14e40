#pragma once
// The graph of tests/fixtures/make_graph_parity_fixtures.py, shared by the
// CPU parity test (test_graph.cpp) and the GPU-against-CPU test
// (test_cuda_training.cpp): a residual add that reads the input twice, then a
// concat of two branches.
#include "convoy/nn/model.h"

namespace convoy::testing {

inline nn::Model joins_graph() {
  using namespace nn;
  GraphBuilder g({3, 8, 8});
  auto x = g.input();
  auto y = g.add(Conv2d{.filters = 4, .kernel = 3, .padding = 1}, x);
  y = g.add(BatchNorm{}, y);
  y = g.add(ReLU{}, y);
  y = g.add(Conv2d{.filters = 3, .kernel = 3, .padding = 1}, y);
  auto sum = g.add(Add{}, {x, y});
  auto p = g.add(MaxPool2d{.kernel = 2}, sum);
  auto q = g.add(Conv2d{.filters = 2, .kernel = 1}, p);
  auto c = g.add(Concat{}, {p, q});
  auto f = g.add(Flatten{}, c);
  g.add(Dense{.units = 5}, f);
  return g.build();
}

}  // namespace convoy::testing
