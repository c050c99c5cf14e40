// The CPU backend's own kernels (convolutions, max-pool, batch norm)
// against plain reference loops in double, on
// shapes that take each kernel's fast path and shapes that fall back to
// oneDNN or to the generic loop: odd widths, batch 1, batches the threads do
// not divide, filter counts that do not fill a register tile, several row
// bands per image. The finite-difference checks (test_gradcheck.cpp) are
// coarse; these pin every gradient to float rounding. Each runs for every
// kernel set this CPU runs (base, AVX2, AVX-512: one source, different
// widths), naming the sets it skips.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>
#include <utility>

#include <gtest/gtest.h>

#include "backends/cpu/backend_entry.h"
#include "backends/cpu/planes.h"
#include "backends/cpu/simd.h"
#include "backends/cpu/winograd_conv.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/cpu_info.h"
#include "convoy/core/threads.h"
#include "test_helpers.h"

namespace convoy {
namespace {

using namespace nn;

struct Images {
  int64_t n, c, h, w;
  CONVOY_REFERENCE_LOOPS float at(const std::vector<float>& v, int64_t i, int64_t ch, int64_t y, int64_t x) const {
    return v[static_cast<std::size_t>(((i * c + ch) * h + y) * w + x)];
  }
};

std::vector<float> uniform(std::size_t count, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (float& x : v) x = rng.uniform(-1.0f, 1.0f);
  return v;
}

// The gradient a softmax cross-entropy loss (mean over the batch) sends back
// into the logits `out` [n, classes].
CONVOY_REFERENCE_LOOPS std::vector<double> softmax_ce_gradient(const std::vector<float>& out, const std::vector<int32_t>& y, int64_t n) {
  const int64_t classes = static_cast<int64_t>(out.size()) / n;
  std::vector<double> d(out.size());
  for (int64_t i = 0; i < n; ++i) {
    const float* o = out.data() + i * classes;
    double top = o[0], total = 0;
    for (int64_t j = 0; j < classes; ++j) top = std::max(top, static_cast<double>(o[j]));
    for (int64_t j = 0; j < classes; ++j) total += std::exp(o[j] - top);
    for (int64_t j = 0; j < classes; ++j)
      d[i * classes + j] = (std::exp(o[j] - top) / total - (j == y[i] ? 1.0 : 0.0)) / static_cast<double>(n);
  }
  return d;
}

struct ConvCase {
  const char* name;
  int64_t batch, channels, height, width;
  Conv2d conv;
  // Of the gradients. Tens of thousands of logits (the outputs) leave each
  // gradient tiny beside the float rounding of the softmax itself.
  double tolerance = 1e-5;
};

// A Conv2d followed by Flatten: the logits are the convolution's output in
// NCHW order, checked against direct sums; so the output gradient is known
// and the weight, bias and input gradients can be summed directly. The
// weights are set after compiling, as training changes them: no kernel may
// keep a stale copy.
// `bits`, when given, receives the output, the input gradient and the
// parameter gradients as computed.
struct ConvBits {
  std::vector<float> out, dx, grads;
};
// (The library calls it makes stay checked: see CONVOY_REFERENCE_LOOPS.)
CONVOY_REFERENCE_LOOPS void check_conv_gradients(const ConvCase& k, KernelSet set, ConvAlgo algo = ConvAlgo::automatic,
                          ConvBits* bits = nullptr) {
  SCOPED_TRACE(k.name);
  const Sequential model({k.channels, k.height, k.width}, {k.conv, Flatten{}});
  auto exe = compile_cpu(
      model, {.batch_size = k.batch, .loss = Loss::softmax_cross_entropy, .input_gradient = true, .cpu_kernels = set,
                                          .conv_algo = algo}, 7);
  exe->internals().write(Held::parameters, uniform(static_cast<std::size_t>(model.num_parameters()), 8));
  const Images in{k.batch, k.channels, k.height, k.width};
  const std::vector<float> x = uniform(static_cast<std::size_t>(k.batch * numel(model.input_shape())), 3);
  std::vector<int32_t> y(static_cast<std::size_t>(k.batch));
  const int64_t classes = model.output_shape()[0];
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>((i * 7) % classes);
  exe->internals().loss_and_gradients(x.data(), y.data());
  std::vector<float> out(static_cast<std::size_t>(k.batch * classes)), grads(model.num_parameters());
  std::vector<float> params(grads.size()), dx(x.size());
  exe->internals().read(Held::input_gradient, dx);
  exe->internals().read(Held::output, out);
  exe->internals().read(Held::gradients, grads);
  exe->internals().read(Held::parameters, params);
  if (bits) *bits = {out, dx, grads};

  const Shape& o_shape = model.layers()[0].output_shape;  // [O, Ho, Wo]
  const int64_t filters = o_shape[0], oh = o_shape[1], ow = o_shape[2], kk = k.conv.kernel;
  const int64_t per_group = k.channels / k.conv.groups, filters_per_group = filters / k.conv.groups;
  const Window wy = window(k.height, kk, k.conv.stride, k.conv.padding, "conv");
  const Window wx = window(k.width, kk, k.conv.stride, k.conv.padding, "conv");
  const auto& slots = model.layers()[0].params;
  std::vector<float> want_out(out.size());
  for (int64_t n = 0; n < k.batch; ++n)
    for (int64_t o = 0; o < filters; ++o)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t s = 0; s < ow; ++s) {
          double sum = k.conv.bias ? params[slots[1].offset + o] : 0.0;
          for (int64_t c = 0; c < per_group; ++c)
            for (int64_t i = 0; i < kk; ++i)
              for (int64_t j = 0; j < kk; ++j) {
                const int64_t iy = r * k.conv.stride - wy.pad_begin + i, ix = s * k.conv.stride - wx.pad_begin + j;
                if (iy < 0 || iy >= k.height || ix < 0 || ix >= k.width) continue;
                sum += params[((o * per_group + c) * kk + i) * kk + j] *
                       in.at(x, n, o / filters_per_group * per_group + c, iy, ix);
              }
          want_out[((n * filters + o) * oh + r) * ow + s] = static_cast<float>(sum);
        }
  EXPECT_LT(testing::relative_error(out, want_out), 1e-5) << "output";
  const std::vector<double> dy = softmax_ce_gradient(out, y, k.batch);
  std::vector<float> dw(static_cast<std::size_t>(filters * per_group * kk * kk)), db(static_cast<std::size_t>(filters));
  std::vector<double> want_dx(x.size());
  for (int64_t o = 0; o < filters; ++o) {
    const int64_t first_channel = o / filters_per_group * per_group;
    double bias = 0;
    for (int64_t c = 0; c < per_group; ++c)
      for (int64_t i = 0; i < kk; ++i)
        for (int64_t j = 0; j < kk; ++j) {
          double sum = 0;
          for (int64_t n = 0; n < k.batch; ++n)
            for (int64_t r = 0; r < oh; ++r)
              for (int64_t s = 0; s < ow; ++s) {
                const int64_t iy = r * k.conv.stride - wy.pad_begin + i, ix = s * k.conv.stride - wx.pad_begin + j;
                if (iy < 0 || iy >= k.height || ix < 0 || ix >= k.width) continue;
                const double d = dy[((n * filters + o) * oh + r) * ow + s];
                sum += d * in.at(x, n, first_channel + c, iy, ix);
                want_dx[((n * k.channels + first_channel + c) * k.height + iy) * k.width + ix] +=
                    d * params[((o * per_group + c) * kk + i) * kk + j];
              }
          dw[((o * per_group + c) * kk + i) * kk + j] = static_cast<float>(sum);
        }
    for (int64_t n = 0; n < k.batch; ++n)
      for (int64_t r = 0; r < oh * ow; ++r) bias += dy[(n * filters + o) * oh * ow + r];
    db[o] = static_cast<float>(bias);
  }
  EXPECT_LT(testing::relative_error({grads.data() + slots[0].offset, dw.size()}, dw), k.tolerance) << "weight";
  if (k.conv.bias) {
    EXPECT_LT(testing::relative_error({grads.data() + slots[1].offset, db.size()}, db), k.tolerance) << "bias";
  }
  EXPECT_LT(testing::relative_error(dx, std::vector<float>(want_dx.begin(), want_dx.end())), k.tolerance)
      << "input";
}

const ConvCase kConvCases[] = {
    // Our kernels: stride 1, one input channel; the forward pass too below 12 filters.
    {"seed conv 1->10 k5, batch 5", 5, 1, 28, 28, {.filters = 10, .kernel = 5}},
    {"batch 1, odd widths, pad 2, 3 filters", 1, 1, 13, 11, {.filters = 3, .kernel = 5, .padding = 2}},
    {"k3 pad 1, 5 filters", 3, 1, 9, 10, {.filters = 5, .kernel = 3, .padding = 1}},
    {"k1, 9 filters", 3, 1, 5, 6, {.filters = 9, .kernel = 1}},
    {"k7 pad 3, no bias", 2, 1, 16, 20, {.filters = 4, .kernel = 7, .padding = 3, .bias = false}},
    {"k2 same (pads after)", 3, 1, 7, 9, {.filters = 6, .kernel = 2, .padding = kSame}},
    {"k4", 2, 1, 12, 12, {.filters = 3, .kernel = 4}},
    {"k6, wide", 2, 1, 6, 30, {.filters = 2, .kernel = 6}},
    {"many row bands, last band short; oneDNN's forward", 2, 1, 65, 70, {.filters = 16, .kernel = 3}},
    {"11 filters (a tile of 5 padded), pad 1", 3, 1, 10, 9, {.filters = 11, .kernel = 3, .padding = 1}},
    // The weight gradient's tiles take as many filters as fit the registers,
    // in near-equal parts: k1 17 filters as 8 + 9 (AVX-512) or 5 + 6 + 6;
    // k5 13 filters as 4 + 4 + 5 (AVX-512) or six 2s and a 1 (AVX2, base).
    {"k1, 17 filters: weight-gradient tiles of 8 and 9", 2, 1, 5, 7, {.filters = 17, .kernel = 1}},
    {"k5 pad 1, 13 filters: weight-gradient tiles of 4, 4, 5", 2, 1, 14, 13,
     {.filters = 13, .kernel = 5, .padding = 1}},
    // Our direct kernels (direct_conv.h): several input channels, stride 1.
    {"rgb k3 pad 1", 3, 3, 9, 10, {.filters = 5, .kernel = 3, .padding = 1}},
    {"seed conv 10->20 k5", 3, 10, 12, 12, {.filters = 20, .kernel = 5}},
    // oneDNN's: strided, grouped, bigger filters or more channels.
    {"stride 2", 3, 1, 12, 12, {.filters = 4, .kernel = 5, .stride = 2}},
    {"groups 2", 3, 4, 8, 8, {.filters = 4, .kernel = 3, .groups = 2}},
    {"k9", 2, 1, 12, 12, {.filters = 3, .kernel = 9}},
    {"33 channels", 2, 33, 5, 5, {.filters = 4, .kernel = 3}},
};

// Stride-1 convolutions where `auto` runs the direct kernels (direct_conv.h:
// ≤ 10 input channels, not 8; all three passes when the filters are not a
// multiple of 16, else the input gradient only), k ≤ 7. Channel and filter
// counts that fill no vector (of 4, 8 or 16 lanes) or several; rows longer
// than a register tile; padding on every side, asymmetric ("same" with an
// even kernel); batches the threads do not divide; every way of the weight
// gradient (lanes over taps, over filters, split) and both of the input
// gradient (taps whole, split) in the AVX-512 and AVX2 copies.
const ConvCase kDirectCases[] = {
    {"seed conv 10->20 k5, batch 5", 5, 10, 12, 12, {.filters = 20, .kernel = 5}},
    {"k5 pad 2, 7->13, odd 9x11", 3, 7, 9, 11, {.filters = 13, .kernel = 5, .padding = 2}},
    {"k3 pad 1, 3->5, batch 1", 1, 3, 10, 9, {.filters = 5, .kernel = 3, .padding = 1}},
    {"k7 pad 3, 5->17, no bias", 2, 5, 11, 13, {.filters = 17, .kernel = 7, .padding = 3, .bias = false}},
    {"k2 same (pads after), 4->6", 3, 4, 7, 9, {.filters = 6, .kernel = 2, .padding = kSame}},
    {"k4 same (1 before, 2 after), 6->9", 2, 6, 8, 7, {.filters = 9, .kernel = 4, .padding = kSame}},
    {"k1, 10->60 (weight gradient's lanes over filters)", 3, 10, 5, 6, {.filters = 60, .kernel = 1}},
    {"k3, 9->40, rows of 37", 2, 9, 6, 39, {.filters = 40, .kernel = 3}},
    {"k5 pad 4 (all but the kernel), 2->3", 3, 2, 6, 5, {.filters = 3, .kernel = 5, .padding = 4}},
    {"k6, 9->33, batch 7", 7, 9, 9, 10, {.filters = 33, .kernel = 6}},
    {"input gradient only: 1x1 map out of 3x3, 5->16", 4, 5, 3, 3, {.filters = 16, .kernel = 3}},
    {"input gradient only: k3 pad 1, 10->64", 3, 10, 7, 6, {.filters = 64, .kernel = 3, .padding = 1}},
    // 20 taps a row: the AVX-512 copy splits the input gradient's (16 + 4,
    // the rest scattered 4 pixels apart), not the weight gradient's.
    {"k5, 4->14, 9x10: the input gradient's taps split", 2, 4, 9, 10, {.filters = 14, .kernel = 5}},
    // The forward pass's lanes over output pixels (about half the cases
    // here take them in each copy, the seed conv in the AVX-512 and AVX2
    // ones): 7x5 = 35 pixels, the last of 3 vectors partly past them
    // (AVX-512); and a map whose shifted planes pass 1 MiB, back to lanes
    // over the filters (k7 10->3 on 72x72: 7·10·72·66 floats).
    {"forward over pixels, 35 pixels, 10->20 k5 pad 1", 3, 10, 9, 7, {.filters = 20, .kernel = 5, .padding = 1}},
    {"forward over filters: shifted planes over 1 MiB", 1, 10, 72, 72, {.filters = 3, .kernel = 7}},
};

// 3×3, stride 1, pad 1, where F(4×4) would take as many multiplications or
// more (WinogradConv::tile_size): the shapes Winograd F(2×2, 3×3) serves (odd sizes clip the last tile; 1×1 and 2×2 maps are one tile;
// channel counts that do not fill a vector of 8 take the scalar remainder).
const ConvCase kWinogradCases[] = {
    {"16->16, 6x5, batch 3", 3, 16, 6, 5, {.filters = 16, .kernel = 3, .padding = 1}},
    {"odd 5x5, 5->11, bias", 2, 5, 5, 5, {.filters = 11, .kernel = 3, .padding = 1}},
    {"1x1 map, 20->13, no bias", 3, 20, 1, 1, {.filters = 13, .kernel = 3, .padding = 1, .bias = false}},
    {"2x2 map, 24->32, batch 5", 5, 24, 2, 2, {.filters = 32, .kernel = 3, .padding = 1}},
    {"2x5 map, 9->17", 1, 9, 2, 5, {.filters = 17, .kernel = 3, .padding = 1}},
    {"1x7 map, 8->9", 2, 8, 1, 7, {.filters = 9, .kernel = 3, .padding = 1}},
    {"1 input channel, 6x6", 2, 1, 6, 6, {.filters = 8, .kernel = 3, .padding = 1}},
    {"same padding, 12->7, 5x6", 3, 12, 5, 6, {.filters = 7, .kernel = 3, .padding = kSame, .bias = false}},
    // Over 8 MiB of transformed tiles: the forward and input gradient run in
    // blocks of tiles per thread (a short last block, clipped tiles).
    {"blocks of tiles: 16->16, 6x5, batch 500", 500, 16, 6, 5, {.filters = 16, .kernel = 3, .padding = 1}, 1e-4},
};

// Winograd F(4×4, 3×3) (WinogradConv::tile_size: maps of 3×3 and 4×4, 7 and
// more, where it takes fewer multiplications than F(2×2)): 6×6 patches whose last row and column of tiles are clipped on sizes not
// divisible by 4. Its transforms' larger constants (up to 8, and 1/15 in G)
// cost more float rounding than F(2×2)'s: on random 64-channel tiles its
// largest error was 3.1e-6 of the largest output (F(2×2): 4.1e-7), summed
// over at most 64 channels here; the 1e-5 bound leaves 3× for the sums.
const ConvCase kWinogradF4Cases[] = {
    {"F(4x4): 16->16, 8x8 (2x2 tiles), batch 3", 3, 16, 8, 8, {.filters = 16, .kernel = 3, .padding = 1}},
    {"F(4x4): odd 9x11, 5->11, bias, batch 2", 2, 5, 9, 11, {.filters = 11, .kernel = 3, .padding = 1}},
    {"F(4x4): 13x10, 24->9, batch 1, no bias", 1, 24, 13, 10,
     {.filters = 9, .kernel = 3, .padding = 1, .bias = false}},
    {"F(4x4): same padding, 12->7, 8x17", 2, 12, 8, 17, {.filters = 7, .kernel = 3, .padding = kSame}},
    {"F(4x4): ResNet layer1-like 64->64, 16x16, batch 2", 2, 64, 16, 16, {.filters = 64, .kernel = 3, .padding = 1}},
    {"F(4x4): 1 input channel, 10x8, 1->8", 2, 1, 10, 8, {.filters = 8, .kernel = 3, .padding = 1}},
    {"F(4x4): ResNet layer3-like 4x4 map, 40->48, batch 3", 3, 40, 4, 4, {.filters = 48, .kernel = 3, .padding = 1}},
    {"F(4x4): 3x7 map, 6->5, no bias", 2, 6, 3, 7, {.filters = 5, .kernel = 3, .padding = 1, .bias = false}},
    // Over 8 MiB of transformed tiles: blocks of tiles per thread for every
    // pass (a short last block, clipped tiles).
    {"F(4x4) blocks of tiles: 16->16, 63x65, batch 7", 7, 16, 63, 65, {.filters = 16, .kernel = 3, .padding = 1},
     1e-4},
};
// ResNet-18's layer1 in blocks (464 tiles, 9.6 MB of V and M): the weight
// gradient's own sums per thread, 576 KiB of them (one run: the reference
// sums take seconds).
const ConvCase kWinogradF4Layer1Blocks = {
    "F(4x4) blocks of tiles: 64->64, 16x16, batch 29", 29, 64, 16, 16, {.filters = 64, .kernel = 3, .padding = 1}, 1e-4};

// Wide 3×3 convolutions on maps over 4×4, where `automatic` runs every pass
// on F(4×4): clipped tiles, no bias, and (the last) tiles in blocks.
const ConvCase kWinogradAutomaticCases[] = {
    {"automatic: ResNet layer1-like 64->64, 16x16, batch 2", 2, 64, 16, 16, {.filters = 64, .kernel = 3, .padding = 1}},
    {"automatic: 40->56, odd 9x11, no bias, batch 3", 3, 40, 9, 11,
     {.filters = 56, .kernel = 3, .padding = 1, .bias = false}},
    {"automatic, blocks of tiles: 32->64, 40x40, batch 8", 8, 32, 40, 40, {.filters = 64, .kernel = 3, .padding = 1},
     1e-4},
};

// Output maps of at most 16 pixels (4 on Winograd's shapes and on strided
// ones, whose larger maps go to strided_gemm_conv.h), 32 or more channels
// and filters, kernels over 1×1: where `auto` runs every pass as GEMMs over
// the batch (small_map_conv.h). Strides, runs of taps cut by the
// padding on either side or not at all,
// asymmetric padding, counts that split over two threads off cache lines.
const ConvCase kSmallMapCases[] = {
    {"ResNet layer4.0.conv1-like: 3x3 s2 pad 1, 4x4 -> 2x2, 40->48", 3, 40, 4, 4,
     {.filters = 48, .kernel = 3, .stride = 2, .padding = 1}},
    {"3x3 pad 1 on a 2x2 map, 33->35, batch 5, no bias", 5, 33, 2, 2,
     {.filters = 35, .kernel = 3, .padding = 1, .bias = false}},
    {"1x1 map out of 3x3, no padding, 36->32", 2, 36, 3, 3, {.filters = 32, .kernel = 3}},
    {"k5 pad 2, 2x1 map, 32->40", 3, 32, 2, 1, {.filters = 40, .kernel = 5, .padding = 2}},
    {"k2 same (pads after), 2x2, 32->33", 2, 32, 2, 2, {.filters = 33, .kernel = 2, .padding = kSame}},
    {"3x3 s2 no padding, 5x5 -> 2x2, 48->32, batch 7", 7, 48, 5, 5, {.filters = 32, .kernel = 3, .stride = 2}},
    {"3x3 pad 1, a 1x4 row, 32->64", 2, 32, 1, 4, {.filters = 64, .kernel = 3, .padding = 1}},
    // Weights of 2^21 floats or more: the weight gradient per tap over
    // gathered rows (SmallMapConv::kGatherWeights).
    {"ResNet layer4.1-like: 3x3 pad 1 on a 2x2 map, 512->512, batch 2", 2, 512, 2, 2,
     {.filters = 512, .kernel = 3, .padding = 1}},
    {"3x3 s2 pad 1, 3x3 -> 2x2, 480->496, batch 1, no bias", 1, 480, 3, 3,
     {.filters = 496, .kernel = 3, .stride = 2, .padding = 1, .bias = false}},
    // 3x3 pad 1 on 2x2 maps run small_map_taps.h's kernels: a batch past
    // one block of vectors and not whole vectors, channels off the lanes,
    // filters off the groups of 16 and the weight gradient's pairs.
    {"2x2 taps: 40->37, batch 83, bias", 83, 40, 2, 2, {.filters = 37, .kernel = 3, .padding = 1}},
    {"2x2 taps: 72->49, batch 3, no bias", 3, 72, 2, 2, {.filters = 49, .kernel = 3, .padding = 1, .bias = false}},
    // 3x3 s2 pad 1 from 4x4 maps run their weight gradient there too (25
    // pixel pairs of 64; the other passes on the GEMMs); from 3x3 ones (odd:
    // the last row and column see two taps, not three) every pass on the
    // GEMMs above.
    {"4x4 s2 taps: 40->37, batch 83, bias", 83, 40, 4, 4, {.filters = 37, .kernel = 3, .stride = 2, .padding = 1}},
    {"4x4 s2 taps: 72->49, batch 3, no bias", 3, 72, 4, 4,
     {.filters = 49, .kernel = 3, .stride = 2, .padding = 1, .bias = false}},
};

// Convolutions of stride 2 or more, 32 or more channels and filters, 1×1
// without padding or wider to maps of over 4 pixels: where `auto` runs every
// pass as one GEMM over the output pixels' patches (strided_gemm_conv.h).
// Even and odd sizes (the last output row and column owning one input row
// and column or several), stride 3, no bias, a batch whose rows make several
// blocks with a short last one; wider kernels whose patches overlap (3×3 and
// 5×5 at stride 2) or do not (2×2), padding on both sides or only after
// ("same"), input rows no patch reads, and blocks whose patches overlap the
// block after next.
const ConvCase kStridedGemmCases[] = {
    {"ResNet downsample-like: 1x1 s2, 8x8 -> 4x4, 32->40", 3, 32, 8, 8, {.filters = 40, .kernel = 1, .stride = 2}},
    {"odd 7x9 -> 4x5, 1x1 s2, 33->48, no bias", 2, 33, 7, 9,
     {.filters = 48, .kernel = 1, .stride = 2, .bias = false}},
    {"1x1 s3, 10x8 -> 4x3, 32->35, batch 5", 5, 32, 10, 8, {.filters = 35, .kernel = 1, .stride = 3}},
    {"blocks of rows: 1x1 s2, 16x16 -> 8x8, 32->32, batch 40", 40, 32, 16, 16,
     {.filters = 32, .kernel = 1, .stride = 2}},
    {"ResNet layer3.0.conv1-like: 3x3 s2 pad 1, 8x8 -> 4x4, 32->40", 3, 32, 8, 8,
     {.filters = 40, .kernel = 3, .stride = 2, .padding = 1}},
    {"batch 1, odd 5x5 -> 3x3, 3x3 s2 pad 1, 35->48", 1, 35, 5, 5,
     {.filters = 48, .kernel = 3, .stride = 2, .padding = 1}},
    {"ResNet layer2.0.conv1-like, blocks of rows: 3x3 s2 pad 1, 16x16 -> 8x8, 32->33, batch 9, no bias", 9, 32, 16,
     16, {.filters = 33, .kernel = 3, .stride = 2, .padding = 1, .bias = false}},
    {"odd 9x7 -> 4x3, 3x3 s2 no padding, 33->32", 2, 33, 9, 7, {.filters = 32, .kernel = 3, .stride = 2}},
    {"5x5 s2 pad 2, 11x10 -> 6x5, 32->36", 2, 32, 11, 10, {.filters = 36, .kernel = 5, .stride = 2, .padding = 2}},
    {"2x2 s2 (patches side by side), 8x6 -> 4x3, 40->32", 3, 40, 8, 6, {.filters = 32, .kernel = 2, .stride = 2}},
    {"3x3 s2 same (pads after), 8x8 -> 4x4, 32->40", 2, 32, 8, 8,
     {.filters = 40, .kernel = 3, .stride = 2, .padding = kSame}},
    {"3x3 s3 pad 1, 10x11 -> 4x4, 32->32, batch 3", 3, 32, 10, 11,
     {.filters = 32, .kernel = 3, .stride = 3, .padding = 1}},
    // Blocks of one output row, whose 5x5 patches reach the rows of the
    // block after next: the input gradient's blocks in three phases, six
    // blocks of one image over the threads.
    {"5x5 s2 pad 2, a row a block: 11x256 -> 6x128, 32->32, batch 1", 1, 32, 11, 256,
     {.filters = 32, .kernel = 5, .stride = 2, .padding = 2}},
};

struct PoolCase {
  const char* name;
  int64_t batch, channels, height, width;
  MaxPool2d pool;
};

// A MaxPool2d followed by Flatten, its input drawn from a few values so that
// windows tie: the first maximum in window order must win, as in PyTorch.
void check_max_pool(const PoolCase& k, KernelSet set) {
  SCOPED_TRACE(k.name);
  const Sequential model({k.channels, k.height, k.width}, {k.pool, Flatten{}});
  auto exe = compile_cpu(
      model, {.batch_size = k.batch, .loss = Loss::softmax_cross_entropy, .input_gradient = true, .cpu_kernels = set}, 7);
  const Images in{k.batch, k.channels, k.height, k.width};
  std::vector<float> x(static_cast<std::size_t>(k.batch * numel(model.input_shape())));
  Rng rng(5);
  for (float& v : x) v = static_cast<float>(rng.below(5)) - 2.0f;
  std::vector<int32_t> y(static_cast<std::size_t>(k.batch));
  const int64_t classes = model.output_shape()[0];
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>((i * 5) % classes);
  exe->internals().loss_and_gradients(x.data(), y.data());
  std::vector<float> out(static_cast<std::size_t>(k.batch * classes)), dx(x.size());
  exe->internals().read(Held::output, out);
  exe->internals().read(Held::input_gradient, dx);

  const Shape& o_shape = model.layers()[0].output_shape;  // [C, Ho, Wo]
  const int64_t oh = o_shape[1], ow = o_shape[2], kk = k.pool.kernel, s = k.pool.stride ? k.pool.stride : kk;
  const int64_t top = window(k.height, kk, s, k.pool.padding, "pool").pad_begin;
  const int64_t left = window(k.width, kk, s, k.pool.padding, "pool").pad_begin;
  const std::vector<double> dy = softmax_ce_gradient(out, y, k.batch);
  std::vector<float> want_out(out.size());
  std::vector<double> want_dx(x.size());
  for (int64_t n = 0; n < k.batch; ++n)
    for (int64_t c = 0; c < k.channels; ++c)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) {
          float best = -INFINITY;
          int64_t at = -1;
          for (int64_t iy = std::max<int64_t>(r * s - top, 0); iy < std::min(r * s - top + kk, k.height); ++iy)
            for (int64_t ix = std::max<int64_t>(q * s - left, 0); ix < std::min(q * s - left + kk, k.width); ++ix)
              if (in.at(x, n, c, iy, ix) > best) {
                best = in.at(x, n, c, iy, ix);
                at = ((n * k.channels + c) * k.height + iy) * k.width + ix;
              }
          const int64_t o = ((n * k.channels + c) * oh + r) * ow + q;
          want_out[o] = best;
          want_dx[at] += dy[o];
        }
  EXPECT_EQ(out, want_out);
  std::vector<float> want(want_dx.begin(), want_dx.end());
  EXPECT_LT(testing::relative_error(dx, want), 1e-6);
}

const PoolCase kPoolCases[] = {
    {"seed pool 2x2, 10 channels (blocks 0-7 and 2-9)", 3, 10, 24, 24, {.kernel = 2}},
    {"20 channels, batch 1", 1, 20, 8, 8, {.kernel = 2}},
    {"37 channels (a group of 4 blocks, then 1)", 2, 37, 6, 5, {.kernel = 2}},
    {"8 channels, odd size: last row and column in no window", 3, 8, 7, 9, {.kernel = 2}},
    {"3 channels (scalar), odd size", 2, 3, 7, 7, {.kernel = 2}},
    {"stride above kernel: gaps between windows", 2, 12, 8, 11, {.kernel = 2, .stride = 3}},
    {"3x3 stride 3, 9 channels", 3, 9, 10, 11, {.kernel = 3}},
    {"overlapping 3x3/2 padded, 16 channels", 3, 16, 9, 8, {.kernel = 3, .stride = 2, .padding = 1}},
    {"overlapping, scalar channels", 2, 5, 9, 9, {.kernel = 3, .stride = 2, .padding = 1}},
    // Overlapping windows' gradients a vector at a time from 4 channels on,
    // below that a channel at a time.
    {"overlapping 3x3/2 padded, 64 channels (ResNet's stem pool)", 2, 64, 8, 8, {.kernel = 3, .stride = 2, .padding = 1}},
    {"overlapping 3x3/2 padded, 12 channels", 2, 12, 7, 8, {.kernel = 3, .stride = 2, .padding = 1}},
    {"same padding", 2, 11, 7, 6, {.kernel = 3, .stride = 2, .padding = kSame}},
    // Overlapping windows with 4 or more channels gather each input gradient
    // from the windows covering its pixel: up to three a side, pixels no
    // window covers, vectors the channels do not fill (the last overlapping).
    {"overlapping 5x5/2 padded 2, 20 channels: three windows a side", 2, 20, 11, 9,
     {.kernel = 5, .stride = 2, .padding = 2}},
    {"overlapping 3x3/1, 6 channels, odd size", 3, 6, 7, 5, {.kernel = 3, .stride = 1}},
    {"overlapping 4x4/3, 7 channels: the last row and column in no window", 2, 7, 8, 8, {.kernel = 4, .stride = 3}},
    // Rows of whole disjoint windows take the wide kernels (channels rounded
    // up to a power of two, the lanes past them spilling into the next
    // position); the last window of a row, and partial windows, the exact path.
    {"wide rows, 12 channels, same padding: a partial last row and column", 3, 12, 7, 9,
     {.kernel = 2, .padding = kSame}},
    {"wide rows, 3x3 stride 3, 5 channels", 2, 5, 9, 12, {.kernel = 3}},
    {"wide rows, 33 channels (3 vectors of 16)", 2, 33, 4, 6, {.kernel = 2}},
};

// A BatchNorm (random gamma and beta) followed by Flatten in training: its
// output, running statistics, parameter and input gradients against the
// textbook formulas in double. Shapes span several of the kernel's
// 256-float-or-more runs and a remainder, split over the threads.
void check_batch_norm(const char* name, int64_t batch, const Shape& shape, KernelSet set) {
  SCOPED_TRACE(name);
  Sequential model(shape, {BatchNorm{}});
  if (shape.size() == 3) model = Sequential(shape, {BatchNorm{}, Flatten{}});
  auto exe = compile_cpu(
      model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy, .input_gradient = true, .cpu_kernels = set}, 7);
  const int64_t c = shape[0], per_example = numel(shape), inner = per_example / c, m = batch * inner;
  std::vector<float> params = uniform(static_cast<std::size_t>(2 * c), 9);
  exe->internals().write(Held::parameters, params);
  const std::vector<float> x = uniform(static_cast<std::size_t>(batch * per_example), 4);
  std::vector<int32_t> y(static_cast<std::size_t>(batch));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>((i * 3) % per_example);
  exe->internals().loss_and_gradients(x.data(), y.data());
  std::vector<float> out(x.size()), dx(x.size()), grads(params.size()), state(static_cast<std::size_t>(2 * c));
  exe->internals().read(Held::output, out);
  exe->internals().read(Held::input_gradient, dx);
  exe->internals().read(Held::gradients, grads);
  exe->internals().read(Held::state, state);
  const std::vector<double> dy = softmax_ce_gradient(out, y, batch);

  auto at = [&](int64_t n, int64_t ch, int64_t i) { return (n * c + ch) * inner + i; };  // NCHW / NC order
  std::vector<float> want_out(x.size()), want_dx(x.size()), want_grads(params.size()), want_state(state.size());
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean = 0, var = 0, dbeta = 0, dgamma = 0;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) mean += x[at(n, ch, i)];
    mean /= static_cast<double>(m);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) var += (x[at(n, ch, i)] - mean) * (x[at(n, ch, i)] - mean);
    var /= static_cast<double>(m);
    const double invstd = 1 / std::sqrt(var + 1e-5), gamma = params[ch], beta = params[c + ch];
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = at(n, ch, i);
        const double xhat = (x[k] - mean) * invstd;
        want_out[k] = static_cast<float>(gamma * xhat + beta);
        dbeta += dy[k];
        dgamma += dy[k] * xhat;
      }
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = at(n, ch, i);
        const double xhat = (x[k] - mean) * invstd;
        want_dx[k] = static_cast<float>(gamma * invstd * (dy[k] - dbeta / m - xhat * dgamma / m));
      }
    want_grads[ch] = static_cast<float>(dgamma);
    want_grads[c + ch] = static_cast<float>(dbeta);
    want_state[ch] = static_cast<float>(0.1 * mean);                                      // running mean from 0
    want_state[c + ch] = static_cast<float>(0.9 + 0.1 * var * m / (m - 1.0));            // running var from 1
  }
  EXPECT_LT(testing::relative_error(out, want_out), 1e-5) << "output";
  EXPECT_LT(testing::relative_error(dx, want_dx), 1e-4) << "input gradient";
  EXPECT_LT(testing::relative_error(grads, want_grads), 1e-5) << "gamma, beta gradients";
  EXPECT_LT(testing::relative_error(state, want_state), 1e-5) << "running statistics";
}

// The batch statistics of channels far from zero against double sums over
// the same floats: a mean of ~1e6 (float spacing 0.0625) at variance ~0.33,
// the first row an outlier 40 from the mean. A one-pass E[x^2] - E[x]^2 in
// double cancels ~12 digits there and misses by ~1e-4 (checked: this test
// fails with it); the kernel's two passes (batch_norm_op.cpp) do not. Momentum
// 1 makes the running statistics the batch's own (the variance unbiased).
void check_batch_norm_statistics_far_from_zero(int64_t batch, const Shape& shape, KernelSet set) {
  const Sequential model(shape, {BatchNorm{.momentum = 1.0f}, Flatten{}});
  auto exe = compile_cpu(model, {.batch_size = batch, .loss = Loss::softmax_cross_entropy, .cpu_kernels = set}, 7);
  const int64_t c = shape[0], per_example = numel(shape), inner = per_example / c, m = batch * inner;
  std::vector<float> x = uniform(static_cast<std::size_t>(batch * per_example), 4);
  for (float& v : x) v += 1e6f;
  for (int64_t ch = 0; ch < c; ++ch) x[static_cast<std::size_t>(ch * inner)] += 40.0f;  // image 0's first pixel
  const std::vector<int32_t> y(static_cast<std::size_t>(batch), 0);
  exe->internals().loss_and_gradients(x.data(), y.data());
  std::vector<float> state(static_cast<std::size_t>(2 * c));
  exe->internals().read(Held::state, state);
  for (int64_t ch = 0; ch < c; ++ch) {
    SCOPED_TRACE(ch);
    double mean = 0, var = 0;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) mean += x[static_cast<std::size_t>((n * c + ch) * inner + i)];
    mean /= static_cast<double>(m);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t i = 0; i < inner; ++i) {
        const double d = x[static_cast<std::size_t>((n * c + ch) * inner + i)] - mean;
        var += d * d;
      }
    var /= static_cast<double>(m - 1);
    EXPECT_NEAR(state[static_cast<std::size_t>(ch)], mean, 0.51 * 0.0625);  // the nearest float
    EXPECT_NEAR(state[static_cast<std::size_t>(c + ch)], var, 1e-6 * var);
  }
}

// Runs f on n threads (each thread count splits the work differently), then
// restores the thread count; on_one_thread: on one.
template <class F>
void on_threads(int n, F f) {
  const int threads = num_threads();
  set_num_threads(n);
  f();
  set_num_threads(threads);
}
template <class F>
void on_one_thread(F f) {
  on_threads(1, f);
}

}  // namespace

// Every kernel set this CPU runs (the own kernels are one source compiled per
// set, src/backends/cpu/simd.h: the AVX-512 copy runs 16 lanes, the AVX2 one
// 8, the baseline 4); the others are skipped, named.
class CpuKernels : public ::testing::TestWithParam<KernelSet> {
 protected:
  void SetUp() override {
    if (!cpu_runs(GetParam())) GTEST_SKIP() << "this CPU cannot run the " << kernel_set_name(GetParam()) << " kernels";
  }
  KernelSet set() const { return GetParam(); }
};

TEST_P(CpuKernels, BatchNormMatchesReferenceFormulas) {
  check_batch_norm("seed bn 10 channels 12x12, batch 5", 5, {10, 12, 12}, set());
  check_batch_norm("20 channels 4x4, batch 3", 3, {20, 4, 4}, set());
  check_batch_norm("3 channels 5x5, batch 2", 2, {3, 5, 5}, set());
  check_batch_norm("vectors of 50, batch 7", 7, {50}, set());
}

TEST_P(CpuKernels, BatchNormStatisticsFarFromZeroMatchDoubleSums) {
  check_batch_norm_statistics_far_from_zero(6, {5, 9, 7}, set());
  check_batch_norm_statistics_far_from_zero(64, {3, 8, 8}, set());
  on_one_thread([&] { check_batch_norm_statistics_far_from_zero(6, {5, 9, 7}, set()); });
}

TEST_P(CpuKernels, MaxPoolMatchesReferenceWithTiesGoingToTheFirstMaximum) {
  for (const PoolCase& k : kPoolCases) check_max_pool(k, set());
}

// The CPU device's gradient sum at a fork, taken a block of floats at a time
// over every part: each element the parts added in order (part 0 + part 1,
// then + part 2, ...), bit for bit, over several blocks and a partial one,
// and into part 0 itself. Magnitudes far apart, so another order would round
// differently.
TEST_P(CpuKernels, DeviceSumAddsThePartsInOrder) {
  const auto device = cpu::backend(set()).make_device({});
  for (const int64_t n : {int64_t{5}, int64_t{3 * 2048 + 17}})
    for (const std::size_t count : {std::size_t{2}, std::size_t{3}, std::size_t{4}}) {
      SCOPED_TRACE(std::to_string(n) + " floats, " + std::to_string(count) + " parts");
      std::vector<std::vector<float>> parts;
      for (std::size_t k = 0; k < count; ++k) {
        parts.push_back(uniform(static_cast<std::size_t>(n), 20 + k));
        for (float& v : parts.back()) v *= k % 2 ? 1e4f : 1e-3f;
      }
      std::vector<float> want = parts[0];
      for (std::size_t k = 1; k < count; ++k)
        for (std::size_t i = 0; i < want.size(); ++i) want[i] += parts[k][i];
      std::vector<const float*> from;
      for (const auto& p : parts) from.push_back(p.data());
      std::vector<float> into(want.size());
      device->sum(into.data(), from, n);
      EXPECT_EQ(into, want);
      device->sum(parts[0].data(), from, n);
      EXPECT_EQ(parts[0], want);
    }
}

TEST_P(CpuKernels, ConvOutputAndWeightGradientMatchReferenceSums) {
  for (const ConvCase& k : kConvCases) check_conv_gradients(k, set());
}

// The same with one thread: each thread count splits the batch differently.
TEST_P(CpuKernels, ConvOutputAndWeightGradientMatchReferenceSumsOnOneThread) {
  on_one_thread([this] {
    for (const ConvCase& k : kConvCases) check_conv_gradients(k, set());
  });
}

// Forced Winograd, then forced direct (oneDNN), on the shapes Winograd
// serves: both match the reference sums, whichever the timing rule picks.
TEST_P(CpuKernels, WinogradConvMatchesReferenceSums) {
  for (const ConvCase& k : kWinogradCases) check_conv_gradients(k, set(), ConvAlgo::winograd);
}

TEST_P(CpuKernels, WinogradConvMatchesReferenceSumsOnOneThread) {
  on_one_thread([this] {
    for (const ConvCase& k : kWinogradCases) check_conv_gradients(k, set(), ConvAlgo::winograd);
  });
}

// The fixed rules between the tile sizes: forced Winograd takes F(4×4) where
// it needs fewer multiplications (ResNet-18's 16×16, 8×8 and 4×4 maps at
// 64×64 input), F(2×2) on ties (5 and 6) and smaller maps; `automatic` takes
// that for the gradients and, for the forward pass, F(4×4) on maps of at
// most 4×4 only.
static cpu::ConvGeometry square_3x3(int64_t h, int64_t w) {
  return {.batch = 64, .channels = 64, .height = h, .width = w, .filters = 64, .out_height = h, .out_width = w,
          .kernel = 3, .stride = 1, .groups = 1, .pad_top = 1, .pad_left = 1};
}
TEST(WinogradConv, TakesF4WhereItNeedsFewerMultiplications) {
  auto tile = [](int64_t h, int64_t w) { return cpu::WinogradConv::tile_size(square_3x3(h, w)); };
  for (int64_t side : {3, 4, 7, 8, 9, 16, 56}) EXPECT_EQ(tile(side, side), 4) << side;
  for (int64_t side : {1, 2, 5, 6}) EXPECT_EQ(tile(side, side), 2) << side;
  EXPECT_EQ(tile(4, 2), 2);
  EXPECT_EQ(tile(3, 7), 4);
}
TEST(WinogradConv, AutomaticRunsEveryPassOnTheTileWithFewestMultiplications) {
  for (int64_t side : {2, 4, 5, 8, 16}) {
    const cpu::ConvGeometry g = square_3x3(side, side);
    const cpu::WinogradPasses p = cpu::WinogradConv::passes(g, ConvAlgo::automatic);
    EXPECT_TRUE(p.forward && p.input_gradient && p.weight_gradient) << side;
    EXPECT_EQ(p.tile, cpu::WinogradConv::tile_size(g)) << side;
  }
  cpu::ConvGeometry narrow = square_3x3(16, 16);
  narrow.channels = narrow.filters = 16;
  EXPECT_FALSE(cpu::WinogradConv::passes(narrow, ConvAlgo::automatic).any()) << "16->16 stays with oneDNN";
}

// F(4×4, 3×3): every pass against the reference sums, on two threads and on
// one. The forward pass and the input gradient have the same bits on both
// (each output is one GEMM row and one inverse transform, whichever thread
// runs it); the parameter gradients are summed per thread (the bias always,
// the weights when tiles run in blocks), so their bits hold for a thread
// count: the same twice in a row.
static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
TEST_P(CpuKernels, WinogradF4ConvMatchesReferenceSumsWithTheSameBitsOnOneThread) {
  for (const ConvCase& k : kWinogradF4Cases) {
    ConvBits two, again, one;
    check_conv_gradients(k, set(), ConvAlgo::winograd, &two);
    check_conv_gradients(k, set(), ConvAlgo::winograd, &again);
    on_one_thread([&] { check_conv_gradients(k, set(), ConvAlgo::winograd, &one); });
    EXPECT_TRUE(same_bits(two.out, one.out)) << k.name << ": output on 1 and " << num_threads() << " threads";
    EXPECT_TRUE(same_bits(two.dx, one.dx)) << k.name << ": input gradient on 1 and " << num_threads() << " threads";
    EXPECT_TRUE(same_bits(two.out, again.out) && same_bits(two.dx, again.dx) && same_bits(two.grads, again.grads))
        << k.name << ": two runs on " << num_threads() << " threads";
  }
}

// Five threads (on any machine): the weight gradient's blocks add the
// threads' own sums in shares of P · O · C that start and end inside a
// position's matrix (36 positions, 5 shares), past its skew.
TEST_P(CpuKernels, WinogradF4BlocksOnFiveThreadsMatchReferenceSums) {
  const ConvCase& k = kWinogradF4Cases[std::size(kWinogradF4Cases) - 1];  // 16->16, 63x65: blocks on 5 threads
  on_threads(5, [&] { check_conv_gradients(k, set(), ConvAlgo::winograd); });
}
TEST_P(CpuKernels, WinogradF4BlocksOnResNetLayer1MatchReferenceSums) {
  check_conv_gradients(kWinogradF4Layer1Blocks, set(), ConvAlgo::winograd);
}

// `automatic` on maps over 4×4: every pass against the reference sums, on
// two threads and on one, and the same bits as forced Winograd's F(4×4)
// (one WinogradConv serves every pass).
TEST_P(CpuKernels, AutomaticWinogradMatchesReferenceSumsAndForcedWinograd) {
  for (const ConvCase& k : kWinogradAutomaticCases) {
    ConvBits automatic, f4;
    check_conv_gradients(k, set(), ConvAlgo::automatic, &automatic);
    check_conv_gradients(k, set(), ConvAlgo::winograd, &f4);
    on_one_thread([&] { check_conv_gradients(k, set()); });
    EXPECT_TRUE(same_bits(automatic.out, f4.out)) << k.name << ": the forward pass should be F(4x4)'s";
    EXPECT_TRUE(same_bits(automatic.dx, f4.dx)) << k.name;
    EXPECT_TRUE(same_bits(automatic.grads, f4.grads)) << k.name;
  }
}

// The direct kernels (direct_conv.h) for every copy this CPU runs: all three
// passes against the reference sums, on two threads and on one, bit-identical
// run to run; and a sign that they ran: their bits differ from oneDNN's
// (ConvAlgo::direct keeps oneDNN's).
TEST_P(CpuKernels, DirectAllPassesMatchReferenceSums) {
  for (const ConvCase& k : kDirectCases) check_conv_gradients(k, set());
}

TEST_P(CpuKernels, DirectAllPassesMatchReferenceSumsOnOneThread) {
  on_one_thread([&] {
    for (const ConvCase& k : kDirectCases) check_conv_gradients(k, set());
  });
}

// A convolution's output, input gradient and weight gradient, as raw bits.
// per_op: each op splits its own work over the threads (batch slices would
// sum the weight gradient over the slices, in another order on 2 threads).
std::vector<float> conv_bits(const Sequential& model, int64_t batch, KernelSet kernels, ConvAlgo algo) {
  auto exe = compile_cpu(model,
                         {.batch_size = batch, .loss = Loss::softmax_cross_entropy, .input_gradient = true,
                          .cpu_kernels = kernels, .conv_algo = algo, .parallelism = Parallelism::per_op},
                         7);
  exe->internals().write(Held::parameters, uniform(static_cast<std::size_t>(model.num_parameters()), 8));
  const std::vector<float> x = uniform(static_cast<std::size_t>(batch * numel(model.input_shape())), 3);
  std::vector<int32_t> y(static_cast<std::size_t>(batch));
  const auto classes = static_cast<std::size_t>(numel(model.output_shape()));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int32_t>(i * 11 % classes);
  exe->internals().loss_and_gradients(x.data(), y.data());
  std::vector<float> out(static_cast<std::size_t>(batch * numel(model.output_shape()))), dx(x.size()),
      grads(static_cast<std::size_t>(model.num_parameters()));
  exe->internals().read(Held::output, out);
  exe->internals().read(Held::input_gradient, dx);
  exe->internals().read(Held::gradients, grads);
  out.insert(out.end(), dx.begin(), dx.end());
  out.insert(out.end(), grads.begin(), grads.end());
  return out;
}

// The seed CNN's second convolution (batch 9: the threads' shares differ).
std::vector<float> seed_conv_bits(KernelSet kernels, ConvAlgo algo) {
  return conv_bits(Sequential({10, 12, 12}, {Conv2d{.filters = 20, .kernel = 5}, Flatten{}}), 9, kernels, algo);
}

TEST_P(CpuKernels, DirectBitIdenticalRerunsAndNotOneDnnsBits) {
  const std::vector<float> first = seed_conv_bits(set(), ConvAlgo::automatic);
  const std::vector<float> again = seed_conv_bits(set(), ConvAlgo::automatic);
  ASSERT_EQ(first.size(), again.size());
  EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)), 0) << "a rerun changed bits";
  const std::vector<float> onednn = seed_conv_bits(set(), ConvAlgo::direct);
  EXPECT_LT(testing::relative_error(first, onednn), 1e-5);
  EXPECT_NE(std::memcmp(first.data(), onednn.data(), first.size() * sizeof(float)), 0)
      << "the same bits as oneDNN's: the direct kernels did not run";
}

// The small-map GEMMs (small_map_conv.h): all three passes against the
// reference sums on two threads and on one; the same bits on both (every
// sum runs in one order whatever the split), and not oneDNN's bits.
TEST_P(CpuKernels, SmallMapAllPassesMatchReferenceSums) {
  for (const ConvCase& k : kSmallMapCases) check_conv_gradients(k, set());
}

TEST_P(CpuKernels, SmallMapAllPassesMatchReferenceSumsOnOneThread) {
  on_one_thread([&] {
    for (const ConvCase& k : kSmallMapCases) check_conv_gradients(k, set());
  });
}

// A lone convolution's bits under `automatic`: the same on one thread as on
// two, close to oneDNN's and, with `not_onednns`, not oneDNN's bits (a sign
// that our kernels ran; `kernels` names them).
void expect_bits_on_one_and_two_threads(const Sequential& model, int64_t batch, KernelSet set, bool not_onednns,
                                        const char* kernels) {
  const std::vector<float> two = conv_bits(model, batch, set, ConvAlgo::automatic);
  std::vector<float> one;
  on_one_thread([&] { one = conv_bits(model, batch, set, ConvAlgo::automatic); });
  ASSERT_EQ(one.size(), two.size());
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0)
      << "batch " << batch << ": bits depend on the threads";
  const std::vector<float> onednn = conv_bits(model, batch, set, ConvAlgo::direct);
  EXPECT_LT(testing::relative_error(two, onednn), 1e-5);
  if (not_onednns) {
    EXPECT_NE(std::memcmp(two.data(), onednn.data(), two.size() * sizeof(float)), 0)
        << "batch " << batch << ": the same bits as oneDNN's: the " << kernels << " did not run";
  }
}

// The GEMMs of the second model sum 96 rows deep (a batch of 96), the third's
// (weights of 2^21 floats: per tap over gathered rows) 12 (a corner tap) to
// 48 (the centre); the first's at most 20; the fourth's 6.
TEST_P(CpuKernels, SmallMapSameBitsOnOneAndTwoThreadsAndNotOneDnns) {
  const std::pair<Sequential, int64_t> cases[] = {
      {Sequential({40, 4, 4}, {Conv2d{.filters = 48, .kernel = 3, .stride = 2, .padding = 1}, Flatten{}}), 5},
      {Sequential({64, 2, 2}, {Conv2d{.filters = 80, .kernel = 3, .padding = 1}, Flatten{}}), 96},
      {Sequential({512, 2, 2}, {Conv2d{.filters = 528, .kernel = 3, .padding = 1}, Flatten{}}), 12},
      // The weight gradient as GEMMs whose rows are the filters: 64 of them
      // split in two shares changed bits on AVX2 (sgemm.h, over_row_chunks;
      // seen failing on an AMD EPYC, not on the AVX-512 Xeon).
      {Sequential({48, 3, 3}, {Conv2d{.filters = 64, .kernel = 3}, Flatten{}}), 6},
  };
  for (const auto& [model, batch] : cases) expect_bits_on_one_and_two_threads(model, batch, set(), true, "small-map GEMMs");
}

// The strided patches' GEMMs (strided_gemm_conv.h): all three passes
// against the reference sums on two threads and on one; the same bits on
// both (fixed blocks of rows, each weight-gradient sum the whole batch deep),
// and not oneDNN's bits.
TEST_P(CpuKernels, StridedGemmAllPassesMatchReferenceSums) {
  for (const ConvCase& k : kStridedGemmCases) check_conv_gradients(k, set());
  on_one_thread([&] {
    for (const ConvCase& k : kStridedGemmCases) check_conv_gradients(k, set());
  });
}

// The second model's rows make three blocks (two of 128 output rows, one of
// 64) over two threads. Only its bits tell ours from oneDNN's: on the first
// (odd map, 480 rows) oneDNN's 1×1 kernels happen to sum in the same order.
// The third's patches overlap: an input row's gradient sums two output rows'
// entries, added block by block in two phases of blocks.
TEST_P(CpuKernels, StridedGemmSameBitsOnOneAndTwoThreadsAndNotOneDnns) {
  expect_bits_on_one_and_two_threads(Sequential({48, 9, 7}, {Conv2d{.filters = 64, .kernel = 1, .stride = 2}, Flatten{}}),
                                     24, set(), false, "strided GEMMs");
  expect_bits_on_one_and_two_threads(
      Sequential({32, 16, 16}, {Conv2d{.filters = 48, .kernel = 1, .stride = 2}, Flatten{}}), 40, set(), true,
      "strided GEMMs");
  expect_bits_on_one_and_two_threads(
      Sequential({32, 13, 11}, {Conv2d{.filters = 48, .kernel = 3, .stride = 2, .padding = 1}, Flatten{}}), 7, set(),
      true, "strided GEMMs");
}

TEST_P(CpuKernels, DirectConvMatchesReferenceSumsOnWinogradShapes) {
  for (const ConvCase& k : kWinogradCases) check_conv_gradients(k, set(), ConvAlgo::direct);
}

// The restaging helpers every kernel set inlines, in the copy this test is
// compiled for (simd.h's baseline width): rows of every length up to a few
// vectors copied exactly, nothing written past them; transposes of every
// shape up to 19 × 19, both sides whole blocks or not.
TEST(CpuRestaging, CopyRowCopiesEveryLengthAndNothingPast) {
  for (int64_t n = 0; n <= 4 * cpu::simd::kLanes + 3; ++n) {
    const std::vector<float> from = uniform(static_cast<std::size_t>(n), 11);
    std::vector<float> to(static_cast<std::size_t>(n + 2), 7.0f);
    cpu::simd::copy_row(from.data(), n, to.data());
    EXPECT_EQ(std::vector<float>(to.begin(), to.begin() + n), from) << n;
    EXPECT_EQ(to[static_cast<std::size_t>(n)], 7.0f) << n;
  }
}

TEST(CpuRestaging, TransposeOfEveryShape) {
  for (int64_t rows = 1; rows < 20; ++rows)
    for (int64_t cols = 1; cols < 20; ++cols) {
      const int64_t in_stride = cols + 3, out_stride = rows + 2;
      const std::vector<float> in = uniform(static_cast<std::size_t>(rows * in_stride), 12);
      std::vector<float> out(static_cast<std::size_t>(cols * out_stride), 7.0f), want = out;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) want[j * out_stride + i] = in[i * in_stride + j];
      cpu::transpose(in.data(), in_stride, rows, cols, out.data(), out_stride);
      EXPECT_EQ(out, want) << rows << " x " << cols;
    }
}

INSTANTIATE_TEST_SUITE_P(KernelSets, CpuKernels,
                         ::testing::Values(KernelSet::base, KernelSet::avx2, KernelSet::avx512),
                         [](const auto& info) { return std::string(kernel_set_name(info.param)); });

}  // namespace convoy
