// plant_cnn: convoy's own network for Plant-Pathology-sized problems (the
// Keras article's 1,821 leaf photos in 4 classes). Small enough to train from
// scratch on a CPU in minutes, and to not memorise a few thousand images at
// once: ~0.13M parameters, ~0.1 GFLOP per 224x224 image.
//
//   stem       3x3 conv stride 2 -> 32, BN, ReLU6              112x112 (for 224 inputs)
//   blocks.0-6 depthwise-separable: 3x3 depthwise (stride s), BN, ReLU6,
//              1x1 pointwise -> c, BN, ReLU6; a residual add when the
//              shape is kept (stride 1, same channels)
//              (c, s) = (48,2) (48,1) (96,2) (96,1) (192,2) (192,1) (256,2)
//                                                              7x7 x 256
//   head       global average pool, dropout 0.2, dense -> classes (4)
//
// Any input of at least 32x32 works (the blocks halve the size five times);
// global pooling makes the head independent of it.
#include <string>

#include "zoo_blocks.h"

namespace convoy::nn {

Model plant_cnn(const ZooOptions& options) {
  const ZooOptions o = zoo::resolve(options, {3, 224, 224}, 4, 0.2f);
  using zoo::Ref;
  GraphBuilder g(o.input);
  Ref x = zoo::conv_bn(g, g.input(), {.filters = 32, .kernel = 3, .stride = 2, .padding = 1}, "stem.conv", "stem.bn",
                       ReLU6{});
  const std::pair<int64_t, int64_t> blocks[] = {{48, 2}, {48, 1}, {96, 2}, {96, 1}, {192, 2}, {192, 1}, {256, 2}};
  int64_t channels = 32;
  for (std::size_t i = 0; i < std::size(blocks); ++i) {
    const auto [out, stride] = blocks[i];
    const std::string p = "blocks." + std::to_string(i) + ".";
    Ref y = zoo::conv_bn(g, x, {.filters = channels, .kernel = 3, .stride = stride, .padding = 1, .groups = channels},
                         p + "dw", p + "dw_bn", ReLU6{});
    y = zoo::conv_bn(g, y, {.filters = out, .kernel = 1}, p + "pw", p + "pw_bn", ReLU6{});
    x = stride == 1 && out == channels ? g.add(Add{}, {x, y}) : y;
    channels = out;
  }
  zoo::head(g, x, o, "dropout", "classifier");
  return g.build();
}

}  // namespace convoy::nn
