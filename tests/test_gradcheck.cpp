// Finite-difference gradient checks: for every layer and both losses, the
// analytic gradients (parameters and input) match central differences of the
// loss computed by the same Executable.
#include <gtest/gtest.h>

#include "gradient_check.h"
#include "test_helpers.h"

namespace convoy {
namespace {

using namespace nn;
using testing::check_gradients;

}  // namespace

TEST(GradCheck, Conv2d) {
  check_gradients({"conv2d", Sequential({2, 6, 6}, {Conv2d{.filters = 3, .kernel = 3}, Flatten{}})});
}
// Our direct kernels (direct_conv.h): 5×5 padded, channel counts that fill no vector.
TEST(GradCheck, Conv2dDirectPadded) {
  check_gradients({"conv2d k5 p2 5->7", Sequential({5, 7, 6}, {Conv2d{.filters = 7, .kernel = 5, .padding = 2}, Flatten{}})});
}
// Two 3×3 pad-1 convolutions by Winograd F(2×2, 3×3) (odd 5×5 maps: the
// last tiles clipped), the second without a bias and taking the first's
// input gradient through a ReLU.
TEST(GradCheck, Conv3x3WinogradNetwork) {
  check_gradients({.name = "winograd 3->6->5",
                   .model = Sequential({3, 5, 5}, {Conv2d{.filters = 6, .kernel = 3, .padding = 1}, ReLU{},
                                                   Conv2d{.filters = 5, .kernel = 3, .padding = 1, .bias = false},
                                                   Flatten{}}),
                   .conv_algo = ConvAlgo::winograd});
}
TEST(GradCheck, Conv2dStridedPadded) {
  check_gradients(
      {"conv2d s2 p1", Sequential({3, 7, 7}, {Conv2d{.filters = 4, .kernel = 3, .stride = 2, .padding = 1}, Flatten{}})});
}
// 3×3 stride 2 pad 1 from a 4×4 map to a 2×2 one, 32 channels, 33 filters
// (ResNet-18's layer4.0.conv1 shape): `auto` runs the weight gradient on
// small_map_taps.h's kernels, the other passes on SmallMapConv's GEMMs.
TEST(GradCheck, Conv2dStride2Taps4x4To2x2) {
  check_gradients({"conv2d s2 p1 4x4 32->33",
                   Sequential({32, 4, 4}, {Conv2d{.filters = 33, .kernel = 3, .stride = 2, .padding = 1}, Flatten{}})});
}
TEST(GradCheck, MaxPool2d) { check_gradients({"max_pool2d", Sequential({3, 6, 6}, {MaxPool2d{.kernel = 2}, Flatten{}})}); }
TEST(GradCheck, MaxPool2dOverlapping) {
  check_gradients({"max_pool2d k3 s2", Sequential({2, 7, 7}, {MaxPool2d{.kernel = 3, .stride = 2}, Flatten{}})});
}
TEST(GradCheck, ReLU) { check_gradients({"relu", Sequential({2, 3, 3}, {ReLU{}, Flatten{}})}); }
TEST(GradCheck, BatchNormImages) {
  check_gradients({"batch_norm 4d", Sequential({3, 4, 4}, {BatchNorm{}, Flatten{}})});
}
TEST(GradCheck, BatchNormVectors) { check_gradients({"batch_norm 2d", Sequential({5}, {BatchNorm{}})}); }
TEST(GradCheck, Flatten) { check_gradients({"flatten", Sequential({3, 2, 2}, {Flatten{}})}); }
TEST(GradCheck, Dense) { check_gradients({"dense", Sequential({7}, {Dense{.units = 4}})}); }
TEST(GradCheck, LogSoftmaxWithNll) {
  check_gradients({"log_softmax + nll", Sequential({6}, {LogSoftmax{}}), Loss::nll});
}
TEST(GradCheck, SoftmaxCrossEntropy) { check_gradients({"softmax ce", Sequential({6}, {Flatten{}})}); }
TEST(GradCheck, SoftmaxCrossEntropyDenseTargetsSmoothed) {
  check_gradients({"softmax ce dense", Sequential({6}, {Flatten{}}), Loss::softmax_cross_entropy, true, 0.1f});
}
TEST(GradCheck, SoftmaxCrossEntropyLabelSmoothing) {
  check_gradients({"softmax ce smoothed", Sequential({6}, {Flatten{}}), Loss::softmax_cross_entropy, false, 0.2f});
}
TEST(GradCheck, NllDenseTargets) {
  check_gradients({"log_softmax + nll dense", Sequential({6}, {LogSoftmax{}}), Loss::nll, true, 0.1f});
}
TEST(GradCheck, BinaryCrossEntropyMultiLabel) {
  check_gradients({"bce", Sequential({5}, {Dense{.units = 4}}), Loss::binary_cross_entropy, true, 0.1f});
}
// The functional API's joins. The residual block reads the model input twice,
// so the input gradient is a sum over two edges.
TEST(GradCheck, ResidualAddSumsGradientsOverBranches) {
  GraphBuilder g({2, 5, 5});
  auto x = g.input();
  auto y = g.add(Conv2d{.filters = 2, .kernel = 3, .padding = 1}, x);
  y = g.add(BatchNorm{}, y);
  auto sum = g.add(Add{}, {x, y});
  auto f = g.add(Flatten{}, sum);
  g.add(Dense{.units = 3}, f);
  check_gradients({"residual add", g.build()});
}
TEST(GradCheck, ConcatOfImageBranches) {
  GraphBuilder g({2, 5, 5});
  auto x = g.input();
  auto a = g.add(Conv2d{.filters = 2, .kernel = 3, .padding = 1}, x);
  auto b = g.add(Conv2d{.filters = 3, .kernel = 1}, x);
  auto c = g.add(Concat{}, {a, b, a});  // a is read twice
  auto f = g.add(Flatten{}, c);
  g.add(Dense{.units = 3}, f);
  check_gradients({"concat images", g.build()});
}
TEST(GradCheck, ConcatAndAddOfVectors) {
  GraphBuilder g({6});
  auto x = g.input();
  auto a = g.add(Dense{.units = 4}, x);
  auto b = g.add(Dense{.units = 4}, x);
  auto s = g.add(Add{}, {a, b, a});
  auto c = g.add(Concat{}, {s, x});
  g.add(Dense{.units = 3}, c);
  check_gradients({"vector joins", g.build()});
}
TEST(GradCheck, Conv2dGrouped) {
  check_gradients({"conv2d groups 2", Sequential({4, 5, 5}, {Conv2d{.filters = 6, .kernel = 3, .padding = 1, .groups = 2}, Flatten{}})});
}
TEST(GradCheck, Conv2dDepthwiseWithoutBias) {
  check_gradients({"depthwise", Sequential({3, 6, 6}, {Conv2d{.filters = 3, .kernel = 3, .stride = 2, .padding = 1,
                                                              .groups = 3, .bias = false},
                                                       Flatten{}})});
}
TEST(GradCheck, Conv2dSamePaddingAsymmetric) {
  // Stride 2 over 6 pixels: "same" pads 0 before and 1 after.
  check_gradients(
      {"conv2d same s2", Sequential({2, 6, 6}, {Conv2d{.filters = 3, .kernel = 3, .stride = 2, .padding = kSame}, Flatten{}})});
}
TEST(GradCheck, MaxPool2dPadded) {
  check_gradients({"max_pool2d k3 s2 p1", Sequential({2, 7, 7}, {MaxPool2d{.kernel = 3, .stride = 2, .padding = 1}, Flatten{}})});
}
TEST(GradCheck, AvgPool2d) { check_gradients({"avg_pool2d", Sequential({3, 6, 6}, {AvgPool2d{.kernel = 2}, Flatten{}})}); }
TEST(GradCheck, AvgPool2dPaddedCountingPadding) {
  check_gradients({"avg_pool2d k3 s2 p1", Sequential({2, 7, 7}, {AvgPool2d{.kernel = 3, .stride = 2, .padding = 1}, Flatten{}})});
}
TEST(GradCheck, AvgPool2dSameExcludingPadding) {
  check_gradients({"avg_pool2d same", Sequential({2, 5, 5}, {AvgPool2d{.kernel = 3, .stride = 2, .padding = kSame,
                                                                       .count_include_pad = false},
                                                             Flatten{}})});
}
TEST(GradCheck, GlobalAvgPool) { check_gradients({"global_avg_pool", Sequential({4, 3, 5}, {GlobalAvgPool{}})}); }
TEST(GradCheck, DropoutWithItsMaskFixedWithinAStep) {
  check_gradients({"dropout", Sequential({2, 4, 4}, {Dropout{.rate = 0.4f}, Flatten{}})});
}
TEST(GradCheck, ReLU6BothKinks) {
  check_gradients({"relu6", Sequential({2, 3, 3}, {ReLU6{}, Flatten{}}), Loss::softmax_cross_entropy, false, 0, 8.0f});
}
// Bounds between the grid's inputs (3 * (-1 + (2i + 1) / 54)), so no
// finite-difference step crosses one; each bound also alone.
TEST(GradCheck, ClipBothBoundsAndEachAlone) {
  check_gradients({"clip", Sequential({2, 3, 3}, {Clip{.min = -1.25f, .max = 1.75f}, Flatten{}}),
                   Loss::softmax_cross_entropy, false, 0, 3.0f});
  check_gradients({"clip min", Sequential({2, 3, 3}, {Clip{.min = -0.3f}, Flatten{}}), Loss::softmax_cross_entropy, false, 0, 3.0f});
  check_gradients({"clip max", Sequential({2, 3, 3}, {Clip{.max = 0.3f}, Flatten{}}), Loss::softmax_cross_entropy, false, 0, 3.0f});
}
TEST(GradCheck, AffineOnImagesAndRows) {
  check_gradients({"affine image", Sequential({2, 3, 3}, {Conv2d{.filters = 3, .kernel = 1}, Affine{}, Flatten{}})});
  check_gradients({"affine rows", Sequential({6}, {Dense{.units = 4}, Affine{}})});
}
TEST(GradCheck, SiLU) { check_gradients({"silu", Sequential({2, 3, 3}, {SiLU{}, Flatten{}}), Loss::softmax_cross_entropy, false, 0, 3.0f}); }
TEST(GradCheck, Sigmoid) {
  check_gradients({"sigmoid", Sequential({2, 3, 3}, {Sigmoid{}, Flatten{}}), Loss::softmax_cross_entropy, false, 0, 3.0f});
}
// Squeeze-and-excitation: x times a per-channel gate computed from x itself.
TEST(GradCheck, SqueezeExcitationMultiply) {
  GraphBuilder g({4, 3, 3});
  auto x = g.input();
  auto s = g.add(GlobalAvgPool{.keep_dims = true}, x);
  s = g.add(Conv2d{.filters = 2, .kernel = 1}, s);
  s = g.add(SiLU{}, s);
  s = g.add(Conv2d{.filters = 4, .kernel = 1}, s);
  s = g.add(Sigmoid{}, s);
  auto y = g.add(Multiply{}, {x, s});
  auto f = g.add(Flatten{}, y);
  g.add(Dense{.units = 3}, f);
  check_gradients({"squeeze-excitation", g.build()});
}
TEST(GradCheck, MultiplyElementwiseAndPerChannelVector) {
  GraphBuilder g({3, 2, 2});
  auto x = g.input();
  auto a = g.add(Conv2d{.filters = 3, .kernel = 1}, x);
  auto m = g.add(Multiply{}, {x, a});
  auto p = g.add(GlobalAvgPool{}, m);
  auto q = g.add(Multiply{}, {m, p});
  g.add(GlobalAvgPool{}, q);
  check_gradients({"multiply", g.build()});
}
TEST(GradCheck, FrozenLayersPassGradientsButGetNone) {
  Model m({2, 5, 5}, {Conv2d{.filters = 3, .kernel = 3}, BatchNorm{}, ReLU{}, Flatten{}, Dense{.units = 4}});
  m.set_trainable(false, "conv2d_0");
  m.set_trainable(false, "batch_norm_0");
  check_gradients({"frozen conv + bn", m});
}
TEST(GradCheck, SeedCnnEndToEnd) {
  check_gradients({"seed cnn", seed_cnn(), Loss::nll});
}

}  // namespace convoy
