#pragma once
// The max pool's kernels (max_pool2d_op.cpp) for whole output rows and whole
// images of NHWC activations: MaxPool2dOp runs them over the batch, and a
// batch norm that runs the ReLU and the max pool after it (batch_norm_op.cpp)
// runs them on one normalised image at a time, held in cache, so the pooled
// values, window positions and routed gradients are the pool op's bit for bit.
#include <cstdint>
#include <vector>

#include "backends/cpu/pool_geometry.h"

namespace convoy::cpu {

// The windows [first, end) along one axis that cover an input row (or column).
struct WindowSpan {
  int64_t first = 0, end = 0;
  bool empty() const { return first == end; }
};

class MaxPoolKernels {
 public:
  explicit MaxPoolKernels(const PoolGeometry& g);

  const PoolGeometry& geometry() const { return g_; }
  int64_t image_size() const { return g_.h * g_.w * g_.c; }      // input floats per image
  int64_t pooled_size() const { return g_.oh * g_.ow * g_.c; }  // output floats per image

  // Output rows [r0, r1) (r = n * Ho + oy) of the images at src: the maxima
  // into dst, the winning window position (first maximum, as PyTorch) of each
  // into positions; dst and positions are the batch's, as src.
  void max_rows(const float* src, float* dst, uint8_t* positions, int64_t r0, int64_t r1) const;

  // One image's pass, its own pointers (src and dx: image_size() floats,
  // dst, positions and dy: pooled_size()), on the calling thread:
  // max_rows over its rows, and its input gradient, every element written:
  // the sum, in window order, of the output gradients of the windows whose
  // recorded position is that element, +0 where there are none.
  void max_image(const float* src, float* dst, uint8_t* positions) const;
  void route_image(const float* dy, const uint8_t* positions, float* dx) const;

  // The whole batch's input gradient across the threads (MaxPool2dOp).
  void route(const float* dy, const uint8_t* positions, float* dx) const;

 private:
  bool routes_rows() const;  // disjoint windows, 4 or more channels: route_rows' vector path
  void clear_uncovered(float* image_dx) const;

  PoolGeometry g_;
  std::vector<uint8_t> all_positions_;
  std::vector<int64_t> offsets_;
  std::vector<WindowSpan> row_windows_, col_windows_;     // per input row / column: the windows covering it
  std::vector<int64_t> uncovered_rows_, uncovered_cols_;  // input rows/columns no window reads
};

}  // namespace convoy::cpu
