#pragma once
// The weight and bias gradient of a stride-1 convolution of a single-channel
// image (the first layer of a greyscale CNN), by our own AVX2 kernel instead
// of oneDNN's.
//
// Why: oneDNN 2.6 vectorises its backward-weights kernels over channels; with
// one input channel it ran the seed CNN's conv 1→10 k5 at ~30 GFLOP/s, a
// fifth of what two AVX2 cores do. Here each image (in bands of rows that
// stay in L1) is staged as zero-padded planes — the input per channel
// [C][rows][cols], the output gradient per filter [O][rows][cols rounded up
// to 8] — and dW[o][c][kh][kw] = Σ dY[o][y][x] · X[c][y + kh][x + kw] is
// summed eight output columns at a time, a tile of filters × kernel columns
// in registers. Padding is zeros in the staged input, so any padding works.
//
// Deterministic: each thread takes a fixed range of images and its own
// accumulators; the threads' sums are added in thread order.
//   src [N, H, W, C], diff_dst [N, Ho, Wo, O]; dw [O, C, k, k], db [O]
#include <cstdint>
#include <memory>
#include <vector>

#include "convoy/core/tensor.h"

namespace convoy::cpu {

struct ConvGeometry {
  int64_t batch = 0, channels = 0, height = 0, width = 0;      // src
  int64_t filters = 0, out_height = 0, out_width = 0;          // dst
  int64_t kernel = 0, stride = 1, groups = 1, pad_top = 0, pad_left = 0;
};

class ConvWeightGradient {
 public:
  static constexpr int64_t kMaxKernel = 7;

  // Whether this kernel computes the gradient of `g`: built with AVX2 and
  // FMA; stride 1; one input channel (with two, oneDNN was as fast; with
  // three, faster: its kernels vectorise over channels); kernel ≤ 7.
  static bool suits(const ConvGeometry& g);

  explicit ConvWeightGradient(const ConvGeometry& g);
  // db may be null (no bias).
  void run(const float* src, const float* diff_dst, float* dw, float* db);

 private:
  struct Workspace {
    AlignedBuffer input;     // [C][band + k - 1][in_cols]
    AlignedBuffer grad;      // [filters_padded][band][out_cols]
    AlignedBuffer sums;      // [filters_padded][C][k][k][8], then [filters_padded][8] for the bias
    std::vector<float> out;  // this thread's dw then db, summed over its lanes
  };
  void run_thread(Workspace& w, int64_t first_image, int64_t end_image, const float* src, const float* diff_dst);
  void stage_band(Workspace& w, int64_t n, int64_t y0, int64_t rows, const float* src, const float* diff_dst) const;

  ConvGeometry g_;
  int64_t filters_padded_, tile_filters_, out_cols_, in_cols_, band_;
  std::vector<Workspace> threads_;
};

}  // namespace convoy::cpu
