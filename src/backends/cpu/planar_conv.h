#pragma once
// The weight and bias gradient, and with fewer than 12 filters the forward
// pass, of a stride-1 convolution of a single-channel image (the first layer
// of a greyscale CNN), by our own kernels instead of oneDNN's: one source over
// simd::Vec (simd.h), so 16 lanes in the AVX-512 copy, 8 in the AVX2 copy and
// 4 in the baseline copy, the same logic in each.
//
// Why: oneDNN 2.6 vectorises its kernels over channels; with one input
// channel it ran the seed CNN's conv 1→10 k5 backward-weights at ~25 and its
// forward at ~37 GFLOP/s on one core, of ~89 (with 12 or more filters its
// forward, vectorised over filters, could beat ours). Here the images, in bands of
// rows that stay in L1, are staged as zero-padded planes — the input per
// channel [C][rows][in_cols], the output or its gradient per filter
// [O][rows][out_cols] — and both passes run a vector of output positions at
// a time, a tile of filters × (blocks of positions, or kernel columns) in
// registers:
//   forward:  Y[o][y][x] = b[o] + Σ W[o][c][kh][kw] · X[c][y + kh][x + kw]
//   weights:  dW[o][c][kh][kw] = Σ dY[o][y][x] · X[c][y + kh][x + kw]
// The positions are blocked either by rows (out_cols = the width rounded up
// to the lanes) or, where that wastes more, as one flat run per band with
// out_cols = in_cols = width + k - 1, whose k - 1 extra positions per row are
// computed and dropped (seed conv, width 24, k5: rows of 8 in the AVX2 copy,
// 24 of 24 used; a flat run of 16 in the AVX-512 copy, 24 of 28, where rows
// of 16 would use 24 of 32).
// Padding is zeros in the staged input, so any padding works. The gradient
// with respect to the input stays oneDNN's (a first layer needs none).
//
// Deterministic: each thread takes a fixed range of images and its own
// accumulators; the threads' sums are added in thread order.
//   src [N, H, W, C], dst and diff_dst [N, Ho, Wo, O] (NHWC);
//   weight and dw [O, C, k, k], bias and db [O] (PyTorch's layouts)
#include <cstdint>
#include <vector>

#include "backends/cpu/planar_pool.h"
#include "backends/cpu/weighted_op.h"
#include "convoy/core/tensor.h"

namespace convoy::cpu {

struct ConvGeometry {
  int64_t batch = 0, channels = 0, height = 0, width = 0;      // src
  int64_t filters = 0, out_height = 0, out_width = 0;          // dst
  int64_t kernel = 0, stride = 1, groups = 1, pad_top = 0, pad_left = 0;
};

// Which of a convolution's three passes some kernels run.
struct ConvPasses {
  bool forward = false, input_gradient = false, weight_gradient = false;
  bool any() const { return forward || input_gradient || weight_gradient; }
};

class PlanarConv final : public OwnKernels {
 public:
  static constexpr int64_t kMaxKernel = 7;
  // Our forward pass only below this many filters, where it won or tied on
  // one core (seed conv 1→10 k5: 0.99 → 0.59 ms; 1→8 k3: 0.41 both); with
  // 12 filters and k3 oneDNN's was faster (0.49 ms to our 0.59).
  static constexpr int64_t kForwardBelowFilters = 12;

  // Whether these kernels serve `g` (in every copy): stride 1; one
  // input channel (for the weight gradient, with two channels oneDNN was as
  // fast, with three faster: its kernels vectorise over channels); kernel ≤ 7.
  static bool suits(const ConvGeometry& g);

  explicit PlanarConv(const ConvGeometry& g);
  bool runs_forward() const override { return g_.filters < kForwardBelowFilters; }
  // bias / db may be null (no bias).
  void forward(const float* src, const float* weight, const float* bias, float* dst) override;
  void weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) override;

  // The fused first block (conv_pool_op.h): a 2×2 stride-2 max pool, and
  // optionally a ReLU, taken on each band's output planes (planar_pool.h).
  // Possible when this conv runs the forward pass and its bands hold whole
  // windows (an even band; fixed by shape and this copy's lanes). The bands,
  // threads and sums are the unfused passes', so dw and db are theirs bit
  // for bit.
  bool can_pool_2x2() const { return runs_forward() && band_ % 2 == 0; }
  void set_pooling(bool relu);
  // pooled [N, Ho/2, Wo/2, O] (NHWC), after the ReLU when set; positions
  // (positions_size() bytes, this class's layout) are what the gradient reads.
  int64_t positions_size() const;
  void forward_pooled(const float* src, const float* weight, const float* bias, float* pooled, uint8_t* positions);
  // dw and db from the pooled output's gradient (after the ReLU when set).
  void weight_gradient_pooled(const float* src, const float* d_pooled, const uint8_t* positions, float* dw, float* db);

 private:
  struct Workspace {
    AlignedBuffer input;     // [C][in_plane]: band + k - 1 rows of in_cols, and slack
    AlignedBuffer planes;    // [forward_filters][band][out_cols]: the output
    AlignedBuffer grad;      // [filters][band][out_cols]: its gradient
    AlignedBuffer sums;      // [filters][C][k][k][lanes], then [filters][lanes] for the bias
    std::vector<float> out;  // this thread's dw then db, summed over its lanes
    AlignedBuffer pooled, d_pooled;  // with pooling: a band's pooled rows [band / 2][filters][pitch]
  };
  // positions: null, or pool each band (set_pooling) and write pooled rows to dst.
  void forward_images(Workspace& w, int64_t first_image, int64_t end_image, const float* src, float* dst,
                      uint8_t* positions) const;
  // positions: null, or diff_dst is the pooled output's gradient.
  void gradient_images(Workspace& w, int64_t first_image, int64_t end_image, const float* src,
                       const float* diff_dst, const uint8_t* positions) const;
  void run_forward(const float* src, const float* weight, const float* bias, float* dst, uint8_t* positions);
  void run_weight_gradient(const float* src, const float* diff_dst, const uint8_t* positions, float* dw, float* db);
  PlanarPoolBand pool_band(int64_t rows) const;
  // Stages input rows for output rows [y0, y0 + rows) of image n.
  void stage_input(Workspace& w, int64_t n, int64_t y0, int64_t rows, const float* src) const;

  ConvGeometry g_;
  int64_t forward_filters_;                 // filters rounded up to the forward's register tile
  bool flat_;                               // bands staged as one flat run of positions (planar_conv.cpp)
  int64_t out_cols_, in_cols_, band_;       // staged row lengths; output rows per band
  int64_t in_plane_, out_plane_;            // floats per staged channel / filter plane
  AlignedBuffer weight_, bias_;  // the forward's: [forward_filters][C k²] and [forward_filters], zero-padded
  bool pooling_ = false, relu_ = false;
  int64_t pooled_height_ = 0, pooled_width_ = 0, pitch_ = 0;  // with pooling (planar_pool.h)
  std::vector<Workspace> threads_;
};

}  // namespace convoy::cpu
