// Separable resizing: a table of taps (first source index and weights) per
// output column and per output row, then one pass along each axis through a
// float buffer (no rounding between the passes). The vertical pass runs
// over whole rows and vectorises; the horizontal pass is the short dot
// product per pixel. The pass order is chosen to do the least work.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "convoy/core/error.h"
#include "convoy/image/geometry.h"

namespace convoy::image {
namespace {

// Every output index reads `taps` consecutive source indices from first[o];
// rows near the edge are shifted inwards with zero weights, so the inner
// loops have one fixed length.
struct Taps {
  int taps = 0;
  std::vector<int> first;
  std::vector<float> weights;  // [out][taps]
  const float* w(int o) const { return weights.data() + static_cast<std::size_t>(o) * taps; }
};

Taps make_taps(int in, int out, ResizeMethod method) {
  const double scale = static_cast<double>(in) / out;
  std::vector<std::vector<std::pair<int, double>>> lists(out);
  for (int o = 0; o < out; ++o) {
    auto& l = lists[o];
    if (method == ResizeMethod::bilinear) {
      const double center = (o + 0.5) * scale - 0.5;
      const double fl = std::floor(center);
      const double lerp = center - fl;
      const int lo = std::clamp(static_cast<int>(fl), 0, in - 1), hi = std::clamp(static_cast<int>(fl) + 1, 0, in - 1);
      if (lo == hi) {
        l.push_back({lo, 1.0});
      } else {
        l.push_back({lo, 1.0 - lerp});
        l.push_back({hi, lerp});
      }
    } else {
      const double start = o * scale, end = (o + 1) * scale;
      for (int i = static_cast<int>(std::floor(start)); i < static_cast<int>(std::ceil(end)); ++i) {
        const double overlap = std::min(end, i + 1.0) - std::max(start, static_cast<double>(i));
        if (overlap > 1e-12) l.push_back({std::min(i, in - 1), overlap / scale});
      }
    }
  }
  Taps t;
  for (const auto& l : lists) t.taps = std::max(t.taps, l.back().first - l.front().first + 1);
  t.first.resize(out);
  t.weights.assign(static_cast<std::size_t>(out) * t.taps, 0.0f);
  for (int o = 0; o < out; ++o) {
    double sum = 0;
    for (const auto& [i, w] : lists[o]) sum += w;
    const int first = std::min(lists[o].front().first, in - t.taps);
    t.first[o] = first;
    for (const auto& [i, w] : lists[o])
      t.weights[static_cast<std::size_t>(o) * t.taps + (i - first)] += static_cast<float>(w / sum);
  }
  return t;
}

inline uint8_t to_byte(float v) {
  const int i = static_cast<int>(v + 0.5f);
  return static_cast<uint8_t>(i < 0 ? 0 : (i > 255 ? 255 : i));
}

template <class Out> inline void store(Out* p, float v) {
  if constexpr (std::is_same_v<Out, uint8_t>) *p = to_byte(v);
  else *p = v;
}

// dst row o = sum_k w[o][k] * src row (first[o] + k), for rows of `len` values.
template <class In, class Out>
void vertical(const In* src, std::size_t src_stride, Out* dst, std::size_t dst_stride, std::size_t len,
              const Taps& t, float* acc) {
  for (std::size_t o = 0; o < t.first.size(); ++o) {
    const float* w = t.w(static_cast<int>(o));
    const In* s = src + static_cast<std::size_t>(t.first[o]) * src_stride;
    float* a = std::is_same_v<Out, float> ? reinterpret_cast<float*>(dst + o * dst_stride) : acc;
    const float w0 = w[0];
    for (std::size_t j = 0; j < len; ++j) a[j] = w0 * static_cast<float>(s[j]);
    for (int k = 1; k < t.taps; ++k) {
      const In* sk = s + k * src_stride;
      const float wk = w[k];
      for (std::size_t j = 0; j < len; ++j) a[j] += wk * static_cast<float>(sk[j]);
    }
    if constexpr (std::is_same_v<Out, uint8_t>) {
      Out* d = dst + o * dst_stride;
      for (std::size_t j = 0; j < len; ++j) d[j] = to_byte(a[j]);
    }
  }
}

// Along each of `rows` rows: dst pixel o = sum_k w[o][k] * src pixel (first[o] + k).
template <int C, class In, class Out>
void horizontal(const In* src, std::size_t src_stride, Out* dst, std::size_t dst_stride, int rows, const Taps& t) {
  const int out = static_cast<int>(t.first.size());
  for (int r = 0; r < rows; ++r) {
    const In* s = src + r * src_stride;
    Out* d = dst + r * dst_stride;
    for (int o = 0; o < out; ++o) {
      const float* w = t.w(o);
      const In* p = s + static_cast<std::size_t>(t.first[o]) * C;
      float acc[C] = {};
      for (int k = 0; k < t.taps; ++k)
        for (int c = 0; c < C; ++c) acc[c] += w[k] * static_cast<float>(p[k * C + c]);
      for (int c = 0; c < C; ++c) store(d + o * C + c, acc[c]);
    }
  }
}

template <class In, class Out>
void horizontal_any(int channels, const In* src, std::size_t src_stride, Out* dst, std::size_t dst_stride, int rows,
                    const Taps& t) {
  if (channels == 3) horizontal<3>(src, src_stride, dst, dst_stride, rows, t);
  else horizontal<1>(src, src_stride, dst, dst_stride, rows, t);
}

// Scratch per thread: resizing in a pipeline allocates nothing after the first image.
float* scratch(std::size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

}  // namespace

void resize_into(ImageView src, MutableImageView dst, ResizeMethod method) {
  require(src.data && dst.data && src.width > 0 && src.height > 0 && dst.width > 0 && dst.height > 0,
          "resize: both images must have pixels");
  require(src.channels == dst.channels && (src.channels == 1 || src.channels == 3),
          "resize: source and target must have the same 1 or 3 channels, got " + std::to_string(src.channels) +
              " and " + std::to_string(dst.channels));
  const int C = src.channels;
  const bool same_w = src.width == dst.width, same_h = src.height == dst.height;
  if (same_w && same_h) {
    std::memcpy(dst.data, src.data, src.bytes());
    return;
  }
  if (same_w || same_h) {  // one pass
    if (same_h) {
      horizontal_any(C, src.data, src.row_bytes(), dst.data, dst.row_bytes(), src.height,
                     make_taps(src.width, dst.width, method));
    } else {
      const Taps ty = make_taps(src.height, dst.height, method);
      vertical(src.data, src.row_bytes(), dst.data, dst.row_bytes(), src.row_bytes(), ty, scratch(src.row_bytes()));
    }
    return;
  }
  const Taps tx = make_taps(src.width, dst.width, method), ty = make_taps(src.height, dst.height, method);
  // Work of each order; the vertical pass runs ~8 lanes at a time.
  const double h_first = double(src.height) * dst.width * tx.taps + double(dst.height) * dst.width * ty.taps / 8;
  const double v_first = double(dst.height) * src.width * ty.taps / 8 + double(dst.height) * dst.width * tx.taps;
  if (h_first <= v_first) {
    const std::size_t len = static_cast<std::size_t>(dst.width) * C;
    float* tmp = scratch(len * src.height + len);
    horizontal_any(C, src.data, src.row_bytes(), tmp, len, src.height, tx);
    vertical(static_cast<const float*>(tmp), len, dst.data, dst.row_bytes(), len, ty, tmp + len * src.height);
  } else {
    const std::size_t len = src.row_bytes();
    float* tmp = scratch(len * dst.height);
    vertical(src.data, len, tmp, len, len, ty, nullptr);
    horizontal_any(C, static_cast<const float*>(tmp), len, dst.data, dst.row_bytes(), dst.height, tx);
  }
}

Image resize(ImageView src, int width, int height, ResizeMethod method) {
  Image out(width, height, src.channels);
  resize_into(src, out.view(), method);
  return out;
}

}  // namespace convoy::image
