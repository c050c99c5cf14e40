#pragma once
// A 2×2 stride-2 max pool (and a ReLU after it) taken on a planar
// convolution's staged output planes, band by band, and the way back into
// its gradient planes: the kernels of the fused first block, conv → pool
// (→ ReLU), that conv_pool_op.cpp runs on the CPU device (planar_conv.h has
// the planes). Lanes run over pooled columns: each vector of W pooled
// outputs reads two rows of 2W conv outputs, split into even and odd
// columns. The comparisons are max_pool2d_op.cpp's, in its window order
// (row-major, first maximum wins, a NaN never does), so the pooled values
// and positions are the unfused pool's bit for bit.
#include <cstdint>

namespace convoy::cpu {

// A position no window tap has: the ReLU zeroed this output, so its
// gradient reaches no conv output.
inline constexpr uint8_t kNoPosition = 255;

// One band's planes as the pool sees them. Pooled rows are [py][o][pitch]:
// pitch = the pooled width rounded up to the lanes; the lanes past the
// pooled width hold junk in the forward pass and must be zero in the
// gradient's (the backward pass writes them as zeros into the columns past
// the covered ones, and the next row's first columns, which it writes later).
struct PlanarPoolBand {
  int64_t filters;      // planes in use
  int64_t plane, cols;  // floats between planes, between rows
  int64_t rows;         // conv output rows in the band (an odd last one is no window's)
  int64_t width;        // conv output columns
  int64_t pooled_cols;  // width / 2
  int64_t pitch;        // of the pooled rows and the positions
  bool relu;
};

// Floats a pass may read or write past the last plane's band (junk lanes).
int64_t planar_pool_slack(int64_t pitch);
// The pitch for `pooled_cols`: rounded up to this copy's lanes.
int64_t planar_pool_pitch(int64_t pooled_cols);

// pooled[py][o][pitch] = max over window (py, px) of planes[o] (then
// max(·, 0) with the ReLU); positions likewise: the window position of the
// first maximum (0..3), kNoPosition where the ReLU zeroed the output.
void pool_band_2x2(const PlanarPoolBand& b, const float* planes, float* pooled, uint8_t* positions);

// grad[o] for the band's rows: d_pooled[py][o][px] at each window's recorded
// position, +0 at the other three and in rows and columns no window covers;
// the same values the unfused pool's backward pass writes into its NHWC
// input gradient.
void route_band_2x2(const PlanarPoolBand& b, const float* d_pooled, const uint8_t* positions, float* grad);

}  // namespace convoy::cpu
