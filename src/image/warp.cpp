// Affine warps: one bilinear resampling pass for any mix of rotation, zoom,
// translation and crop-and-resize (their matrices are multiplied first, so
// the picture is resampled once, not once per operation).
#include <cmath>

#include "convoy/core/error.h"
#include "convoy/image/geometry.h"

namespace convoy::image {

Affine Affine::after(const Affine& t) const {
  // this(t(p)) with p' = t p: [a b c; d e f] * [ta tb tc; td te tf; 0 0 1]
  return {a * t.a + b * t.d, a * t.b + b * t.e, a * t.c + b * t.f + c,
          d * t.a + e * t.d, d * t.b + e * t.e, d * t.c + e * t.f + f};
}

Affine Affine::rotation(double radians, int width, int height) {
  const double cs = std::cos(radians), sn = std::sin(radians);
  const double cx = (width - 1) / 2.0, cy = (height - 1) / 2.0;
  // Output -> source is the inverse rotation about the centre (y points down,
  // so a counter-clockwise turn on screen is this matrix).
  return {cs, -sn, cx - cs * cx + sn * cy, sn, cs, cy - sn * cx - cs * cy};
}

Affine Affine::zoom(double zoom_x, double zoom_y, int width, int height) {
  const double cx = (width - 1) / 2.0, cy = (height - 1) / 2.0;
  return {zoom_x, 0, cx * (1 - zoom_x), 0, zoom_y, cy * (1 - zoom_y)};
}

Affine Affine::translation(double dx, double dy) { return {1, 0, -dx, 0, 1, -dy}; }

Affine Affine::window(double x, double y, double w, double h, int dst_width, int dst_height) {
  const double sx = w / dst_width, sy = h / dst_height;
  return {sx, 0, x + 0.5 * sx - 0.5, 0, sy, y + 0.5 * sy - 0.5};
}

namespace {

// A source index for position i of a row of n under `mode`; -1 = the fill value.
inline int fill_index(int i, int n, FillMode mode) {
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case FillMode::constant: return -1;
    case FillMode::nearest: return i < 0 ? 0 : n - 1;
    case FillMode::wrap: {
      const int m = i % n;
      return m < 0 ? m + n : m;
    }
    case FillMode::reflect: {
      const int period = 2 * n;
      int m = i % period;
      if (m < 0) m += period;
      return m < n ? m : period - 1 - m;
    }
  }
  return -1;
}

inline uint8_t to_byte(float v) {
  const int i = static_cast<int>(v + 0.5f);
  return static_cast<uint8_t>(i < 0 ? 0 : (i > 255 ? 255 : i));
}

template <int C>
void warp(ImageView src, MutableImageView dst, const Affine& m, FillMode mode, uint8_t fill_value) {
  const int W = src.width, H = src.height;
  const std::size_t stride = src.row_bytes();
  uint8_t fill[C];
  for (int c = 0; c < C; ++c) fill[c] = fill_value;
  for (int y = 0; y < dst.height; ++y) {
    uint8_t* out = dst.row(y);
    // Positions advance by (a, d) per pixel; recomputing each from the row
    // start keeps integer positions exact (no accumulated rounding).
    const double row_x = m.b * y + m.c, row_y = m.e * y + m.f;
    for (int x = 0; x < dst.width; ++x, out += C) {
      const double sx = m.a * x + row_x, sy = m.d * x + row_y;
      const double fx0 = std::floor(sx), fy0 = std::floor(sy);
      const float fx = static_cast<float>(sx - fx0), fy = static_cast<float>(sy - fy0);
      const int x0 = static_cast<int>(std::max(-1e9, std::min(1e9, fx0)));
      const int y0 = static_cast<int>(std::max(-1e9, std::min(1e9, fy0)));
      const float w00 = (1 - fx) * (1 - fy), w01 = fx * (1 - fy), w10 = (1 - fx) * fy, w11 = fx * fy;
      const uint8_t *p00, *p01, *p10, *p11;
      if (x0 >= 0 && y0 >= 0 && x0 + 1 < W && y0 + 1 < H) {
        p00 = src.data + y0 * stride + x0 * C;
        p01 = p00 + C;
        p10 = p00 + stride;
        p11 = p10 + C;
      } else {
        const int xa = fill_index(x0, W, mode), xb = fill_index(x0 + 1, W, mode);
        const int ya = fill_index(y0, H, mode), yb = fill_index(y0 + 1, H, mode);
        auto at = [&](int xi, int yi) { return xi < 0 || yi < 0 ? fill : src.data + yi * stride + xi * C; };
        p00 = at(xa, ya);
        p01 = at(xb, ya);
        p10 = at(xa, yb);
        p11 = at(xb, yb);
      }
      for (int c = 0; c < C; ++c) out[c] = to_byte(w00 * p00[c] + w01 * p01[c] + w10 * p10[c] + w11 * p11[c]);
    }
  }
}

}  // namespace

void warp_affine(ImageView src, MutableImageView dst, const Affine& m, FillMode mode, uint8_t fill_value) {
  require(src.data && dst.data && src.channels == dst.channels && (src.channels == 1 || src.channels == 3),
          "warp_affine: source and target must have pixels and the same 1 or 3 channels");
  require(src.data != dst.data, "warp_affine: the target must not be the source");
  if (src.channels == 3) warp<3>(src, dst, m, mode, fill_value);
  else warp<1>(src, dst, m, mode, fill_value);
}

}  // namespace convoy::image
