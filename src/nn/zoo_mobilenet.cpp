// MobileNetV2 as torchvision builds it (torchvision/models/mobilenetv2.py,
// width 1.0): "features.0" a 3x3 stride-2 stem, then inverted residual blocks
// "features.1".."features.17" (1x1 expansion unless the ratio is 1, 3x3
// depthwise, 1x1 linear projection; a residual add when the shape is kept),
// "features.18" a 1x1 convolution to 1280 channels, global average pooling,
// "classifier.0" dropout and "classifier.1" dense. Activations are ReLU6.
#include <string>

#include "zoo_blocks.h"

namespace convoy::nn {
namespace {

using zoo::Ref;

// An inverted residual block named "features.<index>.conv.<j>...".
Ref inverted_residual(GraphBuilder& g, Ref x, int64_t in, int64_t out, int64_t stride, int64_t expand,
                      const std::string& p) {
  const int64_t hidden = in * expand;
  int j = 0;
  auto unit = [&] { return p + std::to_string(j++); };
  Ref y = x;
  if (expand != 1) {
    const std::string u = unit();
    y = zoo::conv_bn(g, y, {.filters = hidden, .kernel = 1}, u + ".0", u + ".1", ReLU6{});
  }
  const std::string u = unit();
  y = zoo::conv_bn(g, y, {.filters = hidden, .kernel = 3, .stride = stride, .padding = 1, .groups = hidden}, u + ".0",
                   u + ".1", ReLU6{});
  const std::string project = unit(), bn = unit();
  y = zoo::conv_bn(g, y, {.filters = out, .kernel = 1}, project, bn, std::nullopt);
  return stride == 1 && in == out ? g.add(Add{}, {x, y}) : y;
}

}  // namespace

Model mobilenet_v2(const ZooOptions& options) {
  const ZooOptions o = zoo::resolve(options, {3, 224, 224}, 1000, 0.2f);
  // expansion t, channels c, repeats n, first stride s (the paper's table 2)
  struct Stage {
    int64_t t, c, n, s;
  };
  const Stage stages[] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  GraphBuilder g(o.input);
  Ref x = zoo::conv_bn(g, g.input(), {.filters = 32, .kernel = 3, .stride = 2, .padding = 1}, "features.0.0",
                       "features.0.1", ReLU6{});
  int64_t channels = 32;
  int index = 1;
  for (const Stage& st : stages)
    for (int64_t i = 0; i < st.n; ++i) {
      x = inverted_residual(g, x, channels, st.c, i == 0 ? st.s : 1, st.t,
                            "features." + std::to_string(index++) + ".conv.");
      channels = st.c;
    }
  x = zoo::conv_bn(g, x, {.filters = 1280, .kernel = 1}, "features.18.0", "features.18.1", ReLU6{});
  zoo::head(g, x, o, "classifier.0", "classifier.1");
  return g.build();
}

}  // namespace convoy::nn
