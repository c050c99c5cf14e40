// ResNets as torchvision builds them (torchvision/models/resnet.py): a 7x7
// stride-2 stem, a 3x3 stride-2 max-pool, four stages of residual blocks
// ("layer1".."layer4", 64..512 planes, the first block of stages 2-4 halving
// the size), global average pooling and "fc". A shortcut that changes shape
// is a 1x1 convolution and a batch norm ("downsample.0", "downsample.1").
#include <string>

#include "zoo_blocks.h"

namespace convoy::nn {
namespace {

using zoo::Ref;

enum class Block { basic, bottleneck };

// One residual block; `channels` is its input's channel count and becomes its output's.
Ref residual(GraphBuilder& g, Ref x, Block kind, int64_t planes, int64_t stride, int64_t& channels,
             const std::string& p) {
  Ref y;
  int64_t out;
  if (kind == Block::basic) {
    out = planes;
    y = zoo::conv_bn(g, x, {.filters = planes, .kernel = 3, .stride = stride, .padding = 1}, p + "conv1", p + "bn1", ReLU{});
    y = zoo::conv_bn(g, y, {.filters = planes, .kernel = 3, .padding = 1}, p + "conv2", p + "bn2", std::nullopt);
  } else {
    out = planes * 4;
    y = zoo::conv_bn(g, x, {.filters = planes, .kernel = 1}, p + "conv1", p + "bn1", ReLU{});
    y = zoo::conv_bn(g, y, {.filters = planes, .kernel = 3, .stride = stride, .padding = 1}, p + "conv2", p + "bn2", ReLU{});
    y = zoo::conv_bn(g, y, {.filters = out, .kernel = 1}, p + "conv3", p + "bn3", std::nullopt);
  }
  Ref shortcut = x;
  if (stride != 1 || channels != out)
    shortcut = zoo::conv_bn(g, x, {.filters = out, .kernel = 1, .stride = stride}, p + "downsample.0",
                            p + "downsample.1", std::nullopt);
  channels = out;
  return g.add(ReLU{}, g.add(Add{}, {y, shortcut}));
}

Model resnet(Block kind, const int (&blocks)[4], const ZooOptions& options) {
  const ZooOptions o = zoo::resolve(options, {3, 224, 224}, 1000, 0);
  GraphBuilder g(o.input);
  Ref x = zoo::conv_bn(g, g.input(), {.filters = 64, .kernel = 7, .stride = 2, .padding = 3}, "conv1", "bn1", ReLU{});
  x = g.add(MaxPool2d{.kernel = 3, .stride = 2, .padding = 1}, x);
  int64_t channels = 64;
  for (int stage = 0; stage < 4; ++stage)
    for (int b = 0; b < blocks[stage]; ++b)
      x = residual(g, x, kind, int64_t{64} << stage, stage > 0 && b == 0 ? 2 : 1, channels,
                   "layer" + std::to_string(stage + 1) + "." + std::to_string(b) + ".");
  zoo::head(g, x, o, "dropout", "fc");
  return g.build();
}

}  // namespace

Model resnet18(const ZooOptions& o) { return resnet(Block::basic, {2, 2, 2, 2}, o); }
Model resnet34(const ZooOptions& o) { return resnet(Block::basic, {3, 4, 6, 3}, o); }
Model resnet50(const ZooOptions& o) { return resnet(Block::bottleneck, {3, 4, 6, 3}, o); }

}  // namespace convoy::nn
