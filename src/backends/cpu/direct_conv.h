#pragma once
// A direct convolution for small channel counts (≤ 32 input channels, ≤ 64
// filters, kernel ≤ 7, stride 1, groups 1, padding below the kernel size):
// the forward pass, the gradient with respect to the input and the weight
// gradient, by our own kernels written once over simd::Vec.
//
// Why: oneDNN 2.6 ran the seed CNN's conv 10→20 k5 on 12×12 maps at ~87
// GFLOP/s forward and backward on two AVX-512 cores (~320 peak), half of the
// training step; its kernels block channels by 16 and waste most of each
// block at 10 and 20.
//
// Each pass is a small matrix product read straight from NHWC images (no
// im2col): the taps (kw, c) of one kernel row kh are contiguous in an NHWC
// row, kernel rows a row stride apart. A register tile holds R rows × NV
// vectors of sums (one tile function serves all three passes):
//   forward:   Y[y][x][o]  = b[o] + Σ_kh Σ_(kw,c) X[y+kh][x+kw][c] · Wf[kh][kw,c][o]
//              rows: R output pixels of one row, lanes: the filters; or
//              rows: R filters, lanes: the output pixels (below)
//   input gradient: dX'[y+kh][x+kw][c] += Σ_o dY[y][x][o] · Wi[kh][o][kw,c]
//              into the padded input's shape (then cropped): rows: R output
//              pixels, lanes: the taps (kw, c) of kernel row kh, which land
//              on k·C contiguous floats; each tile's sums are added to
//              memory once, so no work is spent on zero padding (a forward
//              pass of the zero-padded dY would do 2.25× the products at
//              12×12, k5)
//   weights:   dW[kh][kw,c][o] = Σ_y Σ_x X[y+kh][x+kw][c] · dY[y][x][o]
//              rows: R taps (kw, c), lanes: the filters, or rows: R
//              filters, lanes: the taps of kernel row kh; summed over an
//              image's pixels in registers, then added to the thread's sums
// Split taps: k·C taps rarely fill whole vectors (50 taps → 64 lanes at
// 10→20 k5 on AVX-512, 78%). The taps in whole vectors (48) then take the
// tiles above with lanes over taps; the rest (2 per kernel row, k·2 in all)
// are restaged per image into one short row per pixel and take a second,
// small product: the weight gradient's with lanes over the filters, the
// input gradient's as dR[pixel][kh, rest] = Σ_o dY[pixel][o] · W, lanes
// over (kh, rest), added into the padded input gradient after the tiles.
// Each pass takes the way with the fewest vector FMAs by a fixed count per
// shape (at 10→20 k5 on AVX-512: 20% fewer than all taps in lanes).
// Forward lanes over pixels: 20 filters fill 20 of 32 lanes on AVX-512
// (62%); an 8×8 output map fills 4 vectors. The image is restaged per
// thread as shifted planes S[kw][c][y][x] = X[y][x + kw][c] (y over the
// padded input's rows, x over the output's columns), so that the taps
// (kw, c) of kernel row kh meet every output pixel p = y·Wo + x at
// S[kw][c][kh·Wo + p]: for each tap one contiguous run of pixels, read a
// vector at a time, the weight broadcast. The sums land in [O][pixels]
// planes, initialised to the bias and transposed to NHWC. The same products
// in the same order as the lanes over filters (Σ_kh Σ_(kw,c), then added to
// the bias), so both ways give the same bits. Taken where it costs fewer
// vector FMAs, counting one per float restaged or transposed, and the
// shifted planes stay within 1 MiB.
// Padded images are staged per thread (zeros around the image), so padding
// costs no branch in the tiles.
//
// Deterministic: each thread takes a fixed range of images. Every output
// value of the forward pass and the input gradient is one sum in a fixed
// order, the same for any thread count; the weight gradient's per-image sums
// are added in image order per thread, the threads' sums in thread order, so
// it is bit-identical for a given thread count (as PlanarConv's).
//   src and diff_src [N, H, W, C], dst and diff_dst [N, Ho, Wo, O] (NHWC);
//   weight and dw [O, C, k, k], bias and db [O] (PyTorch's layouts)
#include <cstdint>
#include <vector>

#include "backends/cpu/planar_conv.h"
#include "backends/cpu/weighted_op.h"
#include "convoy/core/tensor.h"

namespace convoy::cpu {

using DirectPasses = ConvPasses;

class DirectConv final : public OwnKernels {
 public:
  static constexpr int64_t kMaxChannels = 32, kMaxFilters = 64, kMaxKernel = 7;

  // Stride 1, groups 1, channels and filters and kernel within the limits
  // above, and every side's padding below the kernel size.
  static bool suits(const ConvGeometry& g);
  // The passes to run here under `algo`: none unless automatic (direct means
  // oneDNN's, winograd Winograd's); under automatic, those measured to beat
  // oneDNN: the input gradient with ≤ 10 input channels, not 8; the forward
  // pass and weight gradient too when the filters are not a multiple of 16
  // (direct_conv.cpp gives the measurements).
  static DirectPasses passes(const ConvGeometry& g, ConvAlgo algo);

  DirectConv(const ConvGeometry& g, DirectPasses passes);

  bool runs_forward() const override { return passes_.forward; }
  bool runs_weight_gradient() const override { return passes_.weight_gradient; }
  bool runs_input_gradient() const override { return passes_.input_gradient; }
  void prepare(const float* weight) override;
  void forward(const float* src, const float* weight, const float* bias, float* dst) override;
  void weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) override;
  void input_gradient(const float* diff_dst, const float* weight, float* diff_src) override;

 private:
  // The weight gradient's lanes: over the filters, over the taps (kw, c),
  // or over the taps in whole vectors and the filters for the rest.
  enum class WeightLanes { filters, taps, split };

  struct Workspace {
    AlignedBuffer image;        // the padded input [Ho + k − 1][Wo + k − 1][C]
    AlignedBuffer scatter;      // the input gradient of the padded input, as `image`
    AlignedBuffer grad;         // dY of one image [Ho][Wo][O rounded up to the lanes] (the weight gradient's)
    AlignedBuffer row;          // one output row, channels rounded up to the lanes
    AlignedBuffer planar;       // the forward's over pixels: the padded input [C][Ho + k − 1][Wo + k − 1]
    AlignedBuffer shifted;      // … its shifted planes [k][C][Ho + k − 1][Wo]
    AlignedBuffer planes;       // … and the output [O][Ho·Wo rounded up to the lanes]
    AlignedBuffer sums;         // [k][k·C][O rounded up] or [k][O][k·C rounded up], then the rest's, then the bias's
    AlignedBuffer rest;         // split taps, per pixel: the weight gradient's [k][rest], the input gradient's sums
  };
  const float* stage_input(Workspace& w, const float* image, bool slack) const;
  void gather_rest(const float* in, float* rest) const;
  void shift_planes(Workspace& w, const float* image) const;
  void forward_over_pixels(Workspace& w, const float* image, float* out) const;
  void scatter_rest(const float* rest, float* padded) const;

  ConvGeometry g_;
  DirectPasses passes_;
  int64_t pad_bottom_, pad_right_;
  int64_t filters_padded_, taps_padded_;  // O and k·C rounded up to the vector lanes
  int64_t taps_whole_, taps_rest_;        // k·C as whole vectors of lanes + the rest
  int64_t rest_padded_;                   // k · taps_rest_ rounded up to the lanes
  WeightLanes weight_lanes_;
  bool input_split_;                      // the input gradient's taps split
  bool forward_pixels_;                   // the forward pass's lanes over the output pixels
  int64_t pixels_padded_;                 // Ho·Wo rounded up to the lanes
  AlignedBuffer forward_weight_;              // [k][k·C][O rounded up], over pixels [O][k][k·C]
  AlignedBuffer input_weight_;                // [k][O][k·C rounded up]
  AlignedBuffer rest_weight_;                 // [O][k · rest, rounded up]: the input gradient's split taps
  AlignedBuffer bias_;                        // [O rounded up]
  std::vector<Workspace> threads_;
};

}  // namespace convoy::cpu
