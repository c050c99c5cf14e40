// The affine matrices of geometry.h: rotations, zooms, translations and
// crop windows, composed before one resampling pass (warp.cpp).
#include <cmath>

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

}  // namespace convoy::image
