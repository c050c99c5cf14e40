// Separable resizing, one output row at a time: a table of taps (first
// source index and weights) per output row and per output column; for each
// output row the vertical taps are summed over whole source rows into one
// float row (vectorised, cache-resident), then the horizontal taps are
// summed from that row into the output. No rounding between the passes and
// no buffer larger than a row. Compiled once per instruction set
// (cmake/isa_units.cmake); resize_into outside the copies is
// src/image/kernels_dispatch.cpp's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "convoy/core/error.h"
#include "convoy/image/geometry.h"

namespace convoy::image {
namespace {

// Every output index reads `taps` consecutive source indices from first[o];
// indices near the edge are shifted inwards with zero weights, so the inner
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
      // Half-pixel centres, clamped at the borders (TF/torch antialias=False).
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
      // Exact coverage of [o, o + 1) * scale (TF's resize_area).
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

// Row scratch per thread: resizing in a pipeline allocates nothing after the first image.
float* scratch(std::size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// acc[j] = sum_k w[k] * rows[k][j]
void vertical_row(const uint8_t* first_row, std::size_t stride, const float* w, int taps, std::size_t len,
                  float* acc) {
  const float w0 = w[0];
  for (std::size_t j = 0; j < len; ++j) acc[j] = w0 * static_cast<float>(first_row[j]);
  for (int k = 1; k < taps; ++k) {
    const uint8_t* row = first_row + k * stride;
    const float wk = w[k];
    if (wk == 0) continue;
    for (std::size_t j = 0; j < len; ++j) acc[j] += wk * static_cast<float>(row[j]);
  }
}

void to_bytes(const float* v, uint8_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float r = std::min(std::max(v[i] + 0.5f, 0.0f), 255.0f);
    out[i] = static_cast<uint8_t>(static_cast<int>(r));
  }
}

// out[o] = sum_k w[o][k] * in[first[o] + k], pixels of C floats. `in` must
// have one readable float past its last pixel and `out` one past its end
// (the 3-channel path moves pixels as 4-float vectors). TAPS > 0 fixes the
// tap count at compile time (the common small ones), 0 reads it from t.
template <int C, int TAPS>
void horizontal_row(const float* in, const Taps& t, float* out) {
  const int n = static_cast<int>(t.first.size());
  const int taps = TAPS > 0 ? TAPS : t.taps;
#if defined(__SSE2__)
  if constexpr (C == 3) {
    for (int o = 0; o < n; ++o) {
      const float* w = t.w(o);
      const float* p = in + static_cast<std::size_t>(t.first[o]) * 3;
      __m128 acc = _mm_mul_ps(_mm_set1_ps(w[0]), _mm_loadu_ps(p));
      for (int k = 1; k < taps; ++k) acc = _mm_add_ps(acc, _mm_mul_ps(_mm_set1_ps(w[k]), _mm_loadu_ps(p + 3 * k)));
      _mm_storeu_ps(out + 3 * o, acc);  // lane 4 is overwritten by the next pixel
    }
    return;
  }
#endif
  for (int o = 0; o < n; ++o) {
    const float* w = t.w(o);
    const float* p = in + static_cast<std::size_t>(t.first[o]) * C;
    float acc[C] = {};
    for (int k = 0; k < taps; ++k)
      for (int c = 0; c < C; ++c) acc[c] += w[k] * p[k * C + c];
    for (int c = 0; c < C; ++c) out[o * C + c] = acc[c];
  }
}

template <int C>
void horizontal_any(const float* in, const Taps& t, float* out) {
  switch (t.taps) {
    case 1: return horizontal_row<C, 1>(in, t, out);
    case 2: return horizontal_row<C, 2>(in, t, out);
    case 3: return horizontal_row<C, 3>(in, t, out);
    case 4: return horizontal_row<C, 4>(in, t, out);
    case 5: return horizontal_row<C, 5>(in, t, out);
    default: return horizontal_row<C, 0>(in, t, out);
  }
}

}  // namespace

void resize_into(ImageView src, MutableImageView dst, ResizeMethod method) {
  require(src.data && dst.data && src.width > 0 && src.height > 0 && dst.width > 0 && dst.height > 0,
          "resize: both images must have pixels");
  require(src.channels == dst.channels && (src.channels == 1 || src.channels == 3),
          "resize: source and target must have the same 1 or 3 channels, got " + std::to_string(src.channels) +
              " and " + std::to_string(dst.channels));
  if (src.width == dst.width && src.height == dst.height) {
    std::memcpy(dst.data, src.data, src.bytes());
    return;
  }
  const int C = src.channels;
  const Taps ty = make_taps(src.height, dst.height, method);
  const bool same_width = src.width == dst.width;
  const Taps tx = same_width ? Taps{} : make_taps(src.width, dst.width, method);
  const std::size_t in_len = src.row_bytes(), out_len = dst.row_bytes();
  float* column_sums = scratch(in_len + 1 + out_len + 1);
  float* row_out = column_sums + in_len + 1;
  column_sums[in_len] = 0;  // the float read past the last pixel
  for (int o = 0; o < dst.height; ++o) {
    vertical_row(src.row(ty.first[o]), in_len, ty.w(o), ty.taps, in_len, column_sums);
    if (same_width) {
      to_bytes(column_sums, dst.row(o), out_len);
      continue;
    }
    if (C == 3) horizontal_any<3>(column_sums, tx, row_out);
    else horizontal_any<1>(column_sums, tx, row_out);
    to_bytes(row_out, dst.row(o), out_len);
  }
}

}  // namespace convoy::image
