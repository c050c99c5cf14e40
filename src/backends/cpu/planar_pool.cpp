#include "backends/cpu/planar_pool.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "backends/cpu/pool_lanes.h"
#include "backends/cpu/simd.h"

namespace convoy::cpu {
namespace {

constexpr int W = simd::kLanes;
using L = Lanes<W>;
using F = L::F;
using I = L::I;

// Lanes 2j (even) or 2j + 1 (odd) of the 2W floats a, b.
template <int Odd>
F columns(F a, F b) {
  return [&]<int... J>(std::integer_sequence<int, J...>) {
    return __builtin_shufflevector(a, b, (2 * J + Odd)...);
  }(std::make_integer_sequence<int, W>{});
}

// The inverse: even, odd → 2W floats in column order, first half (High = 0)
// or second half.
template <int High>
F interleave(F even, F odd) {
  return [&]<int... J>(std::integer_sequence<int, J...>) {
    return __builtin_shufflevector(even, odd, (High * W / 2 + J / 2 + (J % 2) * W)...);
  }(std::make_integer_sequence<int, W>{});
}

// One conv output row under a row of windows: columns 2px and 2px + 1 take
// d[px] where the window's position is `left` or `left + 1` (0 and 1 on the
// windows' top row, 2 and 3 on their bottom row), +0 elsewhere.
void route_row(const float* d, const uint8_t* at, int64_t pitch, int32_t left, float* row) {
  for (int64_t p0 = 0; p0 < pitch; p0 += W) {
    const F dv = simd::load<F>(d + p0);
    const I where = widen<W>(at + p0);
    const F even = where == left ? dv : F{}, odd = where == left + 1 ? dv : F{};
    simd::store(row + 2 * p0, interleave<0>(even, odd));
    simd::store(row + 2 * p0 + W, interleave<1>(even, odd));
  }
}

}  // namespace

int64_t planar_pool_pitch(int64_t pooled_cols) { return (pooled_cols + W - 1) / W * W; }
int64_t planar_pool_slack(int64_t pitch) { return 2 * pitch + 2 * W; }

void pool_band_2x2(const PlanarPoolBand& b, const float* planes, float* pooled, uint8_t* positions) {
  const int64_t filters = b.filters, plane = b.plane, cols = b.cols, pitch = b.pitch;
  const bool relu = b.relu;
  for (int64_t py = 0; py < b.rows / 2; ++py)
    for (int64_t o = 0; o < filters; ++o) {
      const float* r0 = planes + o * plane + 2 * py * cols;
      const float* r1 = r0 + cols;
      float* out = pooled + (py * filters + o) * pitch;
      uint8_t* at = positions + (py * filters + o) * pitch;
      for (int64_t p0 = 0; p0 < pitch; p0 += W) {
        const F a0 = simd::load<F>(r0 + 2 * p0), b0 = simd::load<F>(r0 + 2 * p0 + W);
        const F a1 = simd::load<F>(r1 + 2 * p0), b1 = simd::load<F>(r1 + 2 * p0 + W);
        F best = simd::broadcast<F>(-std::numeric_limits<float>::infinity());
        I where{};
        take_greater<W>(columns<0>(a0, b0), 0, best, where);
        take_greater<W>(columns<1>(a0, b0), 1, best, where);
        take_greater<W>(columns<0>(a1, b1), 2, best, where);
        take_greater<W>(columns<1>(a1, b1), 3, best, where);
        if (relu) {
          // oneDNN's ReLU (vmaxps x, 0): x where x > 0, else +0 (for -0,
          // -inf and the -inf of an all-NaN window too); its backward pass
          // passes the gradient where x > 0 only.
          const I positive = best > F{};
          best = positive ? best : F{};
          where = positive ? where : I{} + kNoPosition;
        }
        simd::store(out + p0, best);
        store_bytes<W>(at + p0, where);
      }
    }
}

void route_band_2x2(const PlanarPoolBand& b, const float* d_pooled, const uint8_t* positions, float* grad) {
  const int64_t filters = b.filters, plane = b.plane, cols = b.cols, pitch = b.pitch;
  const int64_t covered_rows = b.rows / 2 * 2;
  // Filter by filter, rows top to bottom, blocks left to right: a block's
  // junk lanes (zeros) spill only into places written after them.
  for (int64_t o = 0; o < filters; ++o) {
    float* g = grad + o * plane;
    for (int64_t py = 0; py < b.rows / 2; ++py) {
      const float* d = d_pooled + (py * filters + o) * pitch;
      const uint8_t* at = positions + (py * filters + o) * pitch;
      float* r0 = g + 2 * py * cols;
      float* r1 = r0 + cols;
      route_row(d, at, pitch, 0, r0);  // r0's last block spills into r1's first columns: written next
      route_row(d, at, pitch, 2, r1);
      // Columns past the blocks' reach that no window covers (an odd width
      // whose pooled width fills whole vectors).
      if (2 * pitch < b.width)
        for (float* r : {r0, r1}) std::fill(r + 2 * pitch, r + b.width, 0.0f);
    }
    if (covered_rows < b.rows) std::fill_n(g + covered_rows * cols, b.width, 0.0f);
  }
}

}  // namespace convoy::cpu
