#pragma once
// Where the windows of a 2-D pooling layer fall on an NHWC image, shared by
// the max- and average-pooling kernels. Window (oy, ox) covers rows
// [oy*s - top, oy*s - top + k) and columns likewise, clipped to the image.
#include <algorithm>
#include <cstdint>

#include "convoy/nn/layers.h"

namespace convoy::cpu {

struct PoolGeometry {
  int64_t n, c, h, w, oh, ow, k, s, top, left;

  // in/out: [N, C, H, W] shapes; padding may be nn::kSame.
  PoolGeometry(const Shape& in, const Shape& out, int64_t kernel, int64_t stride, int64_t padding,
               const std::string& name)
      : n(in[0]), c(in[1]), h(in[2]), w(in[3]), oh(out[2]), ow(out[3]), k(kernel), s(stride ? stride : kernel),
        top(nn::window(h, k, s, padding, name).pad_begin), left(nn::window(w, k, s, padding, name).pad_begin) {}

  // The window's rows [y0, y1) and columns [x0, x1) inside the image.
  int64_t y0(int64_t oy) const { return std::max<int64_t>(oy * s - top, 0); }
  int64_t y1(int64_t oy) const { return std::min(oy * s - top + k, h); }
  int64_t x0(int64_t ox) const { return std::max<int64_t>(ox * s - left, 0); }
  int64_t x1(int64_t ox) const { return std::min(ox * s - left + k, w); }
};

}  // namespace convoy::cpu
