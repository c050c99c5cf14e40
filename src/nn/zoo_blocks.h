#pragma once
// Pieces the zoo's architectures share (private to src/nn).
#include <optional>
#include <string>

#include "convoy/nn/zoo.h"

namespace convoy::nn::zoo {

using Ref = GraphBuilder::Ref;

// The options with the architecture's defaults filled in.
inline ZooOptions resolve(ZooOptions o, Shape input, int64_t classes, float dropout) {
  if (o.input.empty()) o.input = std::move(input);
  if (o.classes == 0) o.classes = classes;
  if (o.dropout < 0) o.dropout = dropout;
  return o;
}

// A bias-free convolution, its batch norm, and optionally an activation:
// torchvision's Conv2dNormActivation, the unit of every architecture here.
inline Ref conv_bn(GraphBuilder& g, Ref x, Conv2d conv, const std::string& conv_name, const std::string& bn_name,
                   std::optional<Layer> activation, BatchNorm bn = {}) {
  conv.bias = false;
  x = g.add(conv, x, conv_name);
  x = g.add(bn, x, bn_name);
  return activation ? g.add(*activation, x) : x;
}

// The classifier: global average pooling, dropout when asked, dense.
inline Ref head(GraphBuilder& g, Ref x, const ZooOptions& o, const std::string& dropout_name,
                const std::string& dense_name) {
  x = g.add(GlobalAvgPool{}, x);
  if (o.dropout > 0) x = g.add(Dropout{.rate = o.dropout}, x, dropout_name);
  return g.add(Dense{.units = o.classes}, x, dense_name);
}

}  // namespace convoy::nn::zoo
