// EfficientNet-B0 and -Lite0 as geffnet builds them (gen_efficientnet.py,
// efficientnet_b0, efficientnet_lite0). B0: SiLU, and in every block a
// squeeze-excitation ("se.conv_reduce" to a quarter of the block's input
// channels, SiLU, "se.conv_expand", sigmoid gate) after the depthwise
// convolution; Lite0: the same layout without squeeze-excitation, with ReLU6.
// Stem (32) and head (1280) are fixed. "conv_stem"/"bn1", then blocks
// "blocks.<stage>.<i>": stage 0 depthwise-separable ("conv_dw", "bn1",
// "conv_pw", "bn2"; no activation after the projection), the others inverted
// residuals ("conv_pw", "bn1", "conv_dw", "bn2", "conv_pwl", "bn3"), with a
// residual add when the shape is kept; "conv_head"/"bn2", global average
// pooling, dropout, "classifier". Padding is symmetric, kernel / 2 (geffnet's
// PyTorch-style padding). tf_efficientnet_lite0 is geffnet's port of
// TensorFlow's network, the layout TensorFlow-trained weights need (the
// pretrained Lite0 of tools/convert_efficientnet_lite0.py): "same" padding
// (an odd total goes to the bottom and right) and batch norm with eps 1e-3,
// momentum 0.01.
#include <string>

#include "zoo_blocks.h"

namespace convoy::nn {

namespace {

using zoo::Ref;

// x times sigmoid(expand(act(reduce(mean(x))))): geffnet's SqueezeExcite.
Ref squeeze_excite(GraphBuilder& g, Ref x, int64_t channels, int64_t reduced, const std::string& p) {
  Ref s = g.add(GlobalAvgPool{.keep_dims = true}, x);
  s = g.add(Conv2d{.filters = reduced, .kernel = 1}, s, p + "se.conv_reduce");
  s = g.add(SiLU{}, s);
  s = g.add(Conv2d{.filters = channels, .kernel = 1}, s, p + "se.conv_expand");
  return g.add(Multiply{}, {x, g.add(Sigmoid{}, s)});
}

Model efficientnet(bool lite, bool tf, const ZooOptions& options) {
  const ZooOptions o = zoo::resolve(options, {3, 224, 224}, 1000, 0.2f);
  const Layer act = lite ? Layer(ReLU6{}) : Layer(SiLU{});
  // repeats, kernel, first stride, expansion, channels (geffnet's arch_def)
  struct Stage {
    int repeats;
    int64_t k, s, e, c;
  };
  const Stage stages[] = {{1, 3, 1, 1, 16}, {2, 3, 2, 6, 24}, {2, 5, 2, 6, 40}, {3, 3, 2, 6, 80},
                          {3, 5, 1, 6, 112}, {4, 5, 2, 6, 192}, {1, 3, 1, 6, 320}};
  const auto pad = [tf](int64_t kernel) { return tf ? kSame : kernel / 2; };
  const BatchNorm bn = tf ? BatchNorm{.momentum = 0.01f, .eps = 1e-3f} : BatchNorm{};
  GraphBuilder g(o.input);
  Ref x = zoo::conv_bn(g, g.input(), {.filters = 32, .kernel = 3, .stride = 2, .padding = pad(3)}, "conv_stem", "bn1",
                       act, bn);
  int64_t channels = 32;
  for (int s = 0; s < 7; ++s) {
    const Stage& st = stages[s];
    for (int i = 0; i < st.repeats; ++i) {
      const std::string p = "blocks." + std::to_string(s) + "." + std::to_string(i) + ".";
      const int64_t stride = i == 0 ? st.s : 1, mid = channels * st.e;
      const Conv2d depthwise{.filters = mid, .kernel = st.k, .stride = stride, .padding = pad(st.k), .groups = mid};
      Ref y = x;
      if (s == 0) {  // depthwise-separable
        y = zoo::conv_bn(g, y, depthwise, p + "conv_dw", p + "bn1", act, bn);
        if (!lite) y = squeeze_excite(g, y, mid, channels / 4, p);
        y = zoo::conv_bn(g, y, {.filters = st.c, .kernel = 1}, p + "conv_pw", p + "bn2", std::nullopt, bn);
      } else {  // inverted residual
        y = zoo::conv_bn(g, y, {.filters = mid, .kernel = 1}, p + "conv_pw", p + "bn1", act, bn);
        y = zoo::conv_bn(g, y, depthwise, p + "conv_dw", p + "bn2", act, bn);
        if (!lite) y = squeeze_excite(g, y, mid, channels / 4, p);
        y = zoo::conv_bn(g, y, {.filters = st.c, .kernel = 1}, p + "conv_pwl", p + "bn3", std::nullopt, bn);
      }
      x = stride == 1 && channels == st.c ? g.add(Add{}, {x, y}) : y;
      channels = st.c;
    }
  }
  x = zoo::conv_bn(g, x, {.filters = 1280, .kernel = 1}, "conv_head", "bn2", act, bn);
  zoo::head(g, x, o, "dropout", "classifier");
  return g.build();
}

}  // namespace

Model efficientnet_b0(const ZooOptions& options) { return efficientnet(false, false, options); }
Model efficientnet_lite0(const ZooOptions& options) { return efficientnet(true, false, options); }
Model tf_efficientnet_lite0(const ZooOptions& options) { return efficientnet(true, true, options); }

}  // namespace convoy::nn
