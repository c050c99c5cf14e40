// Affine warps: one bilinear resampling pass for any mix of rotation, zoom,
// translation and crop-and-resize (their matrices are multiplied first, so
// the picture is resampled once, not once per operation). Compiled once per
// instruction set (cmake/isa_units.cmake; the AVX2 copy takes eight pixels at
// a time); warp_affine outside the copies is src/image/kernels_dispatch.cpp's.
#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "convoy/core/error.h"
#include "convoy/image/geometry.h"

namespace convoy::image {

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
  return static_cast<uint8_t>(static_cast<int>(std::min(std::max(v + 0.5f, 0.0f), 255.0f)));
}

// a + t * (b - a), fused where the CPU can: the scalar and vector paths
// then produce the same bits.
inline float lerp(float a, float b, float t) {
#if defined(__FMA__)
  return std::fma(t, b - a, a);
#else
  return a + t * (b - a);
#endif
}

inline float mul_add(float a, float b, float c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// One output pixel, any position: neighbours outside src follow the fill mode.
template <int C>
inline void warp_pixel(ImageView src, float sx, float sy, FillMode mode, const uint8_t* fill, uint8_t* out) {
  const int W = src.width, H = src.height;
  const std::size_t stride = src.row_bytes();
  const float fx0 = std::floor(sx), fy0 = std::floor(sy);
  const float fx = sx - fx0, fy = sy - fy0;
  const uint8_t *p00, *p01, *p10, *p11;
  if (fx0 >= 0 && fy0 >= 0 && fx0 < W - 1 && fy0 < H - 1) {
    p00 = src.data + static_cast<std::size_t>(fy0) * stride + static_cast<std::size_t>(fx0) * C;
    p01 = p00 + C;
    p10 = p00 + stride;
    p11 = p10 + C;
  } else {
    // Far outside (or NaN, which the clamps send to -1e7): still an index the fill rule maps.
    const int x0 = static_cast<int>(std::min(1e7f, std::max(-1e7f, fx0)));
    const int y0 = static_cast<int>(std::min(1e7f, std::max(-1e7f, fy0)));
    const int xa = fill_index(x0, W, mode), xb = fill_index(x0 + 1, W, mode);
    const int ya = fill_index(y0, H, mode), yb = fill_index(y0 + 1, H, mode);
    auto at = [&](int xi, int yi) {
      return xi < 0 || yi < 0 ? fill : src.data + static_cast<std::size_t>(yi) * stride + static_cast<std::size_t>(xi) * C;
    };
    p00 = at(xa, ya);
    p01 = at(xb, ya);
    p10 = at(xa, yb);
    p11 = at(xb, yb);
  }
  for (int c = 0; c < C; ++c) out[c] = to_byte(lerp(lerp(p00[c], p01[c], fx), lerp(p10[c], p11[c], fx), fy));
}

#if defined(__AVX2__) && defined(__FMA__)
// Fill-mode indices for eight positions i, each in [-n, 2n): reflect folds
// once at either edge, nearest clamps (fill_index's rules).
inline __m256i fill_index8(__m256i i, int n, FillMode mode) {
  const __m256i zero = _mm256_setzero_si256(), last = _mm256_set1_epi32(n - 1);
  if (mode == FillMode::nearest) return _mm256_min_epi32(_mm256_max_epi32(i, zero), last);
  const __m256i below = _mm256_sub_epi32(_mm256_set1_epi32(-1), i);                  // -i - 1
  const __m256i above = _mm256_sub_epi32(_mm256_set1_epi32(2 * n - 1), i);           // 2n - 1 - i
  const __m256i folded = _mm256_blendv_epi8(i, below, _mm256_cmpgt_epi32(zero, i));  // i < 0
  return _mm256_blendv_epi8(folded, above, _mm256_cmpgt_epi32(i, last));              // i > n - 1
}

// Eight RGB output pixels at once: gathers, then the same arithmetic as
// warp_pixel. Neighbourhoods wholly inside src take the direct offsets;
// others (the corners a rotation uncovers) take reflect or nearest indices
// computed here when every position is within one image size of src.
// Returns false, writing nothing, when the per-pixel path must do it.
inline bool warp8_rgb(ImageView src, __m256 sx, __m256 sy, FillMode mode, uint8_t* out) {
  const __m256 fx0 = _mm256_floor_ps(sx), fy0 = _mm256_floor_ps(sy);
  const __m256 zero = _mm256_setzero_ps();
  const int W = src.width, H = src.height;
  const __m256 inside =
      _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(fx0, zero, _CMP_GE_OQ), _mm256_cmp_ps(fy0, zero, _CMP_GE_OQ)),
                    _mm256_and_ps(_mm256_cmp_ps(fx0, _mm256_set1_ps(static_cast<float>(W - 2)), _CMP_LE_OQ),
                                  _mm256_cmp_ps(fy0, _mm256_set1_ps(static_cast<float>(H - 2)), _CMP_LE_OQ)));
  const int stride = static_cast<int>(src.row_bytes());
  const __m256i vstride = _mm256_set1_epi32(stride), three = _mm256_set1_epi32(3);
  __m256i o00, o01, o10, o11;
  if (_mm256_movemask_ps(inside) == 0xff) {
    o00 = _mm256_add_epi32(_mm256_mullo_epi32(_mm256_cvttps_epi32(fy0), vstride),
                           _mm256_mullo_epi32(_mm256_cvttps_epi32(fx0), three));
    o01 = _mm256_add_epi32(o00, three);
    o10 = _mm256_add_epi32(o00, vstride);
    o11 = _mm256_add_epi32(o10, three);
  } else {
    if (mode != FillMode::reflect && mode != FillMode::nearest) return false;
    // In range (and not NaN) for one fold: -n <= i and i + 1 <= 2n - 1.
    const __m256 in_range = _mm256_and_ps(
        _mm256_and_ps(_mm256_cmp_ps(fx0, _mm256_set1_ps(static_cast<float>(-W)), _CMP_GE_OQ),
                      _mm256_cmp_ps(fy0, _mm256_set1_ps(static_cast<float>(-H)), _CMP_GE_OQ)),
        _mm256_and_ps(_mm256_cmp_ps(fx0, _mm256_set1_ps(static_cast<float>(2 * W - 2)), _CMP_LE_OQ),
                      _mm256_cmp_ps(fy0, _mm256_set1_ps(static_cast<float>(2 * H - 2)), _CMP_LE_OQ)));
    if (_mm256_movemask_ps(in_range) != 0xff) return false;
    const __m256i x0 = _mm256_cvttps_epi32(fx0), y0 = _mm256_cvttps_epi32(fy0), one = _mm256_set1_epi32(1);
    const __m256i xa = _mm256_mullo_epi32(fill_index8(x0, W, mode), three);
    const __m256i xb = _mm256_mullo_epi32(fill_index8(_mm256_add_epi32(x0, one), W, mode), three);
    const __m256i ya = _mm256_mullo_epi32(fill_index8(y0, H, mode), vstride);
    const __m256i yb = _mm256_mullo_epi32(fill_index8(_mm256_add_epi32(y0, one), H, mode), vstride);
    o00 = _mm256_add_epi32(ya, xa);
    o01 = _mm256_add_epi32(ya, xb);
    o10 = _mm256_add_epi32(yb, xa);
    o11 = _mm256_add_epi32(yb, xb);
  }
  // Each gather reads 4 bytes for a 3-byte pixel: the bottom-right pixel
  // would read one byte past the image, so leave that to the scalar path.
  const __m256i last = _mm256_set1_epi32(static_cast<int>(src.bytes()) - 4);
  const __m256i past = _mm256_or_si256(_mm256_or_si256(_mm256_cmpgt_epi32(o00, last), _mm256_cmpgt_epi32(o01, last)),
                                       _mm256_or_si256(_mm256_cmpgt_epi32(o10, last), _mm256_cmpgt_epi32(o11, last)));
  if (_mm256_movemask_epi8(past) != 0) return false;
  const int* base = reinterpret_cast<const int*>(src.data);
  const __m256i g00 = _mm256_i32gather_epi32(base, o00, 1);
  const __m256i g01 = _mm256_i32gather_epi32(base, o01, 1);
  const __m256i g10 = _mm256_i32gather_epi32(base, o10, 1);
  const __m256i g11 = _mm256_i32gather_epi32(base, o11, 1);
  const __m256 fx = _mm256_sub_ps(sx, fx0), fy = _mm256_sub_ps(sy, fy0);
  const __m256i byte = _mm256_set1_epi32(0xff);
  __m256i packed = _mm256_setzero_si256();
  for (int c = 0; c < 3; ++c) {
    auto channel = [&](__m256i g) {
      return _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(g, 8 * c), byte));
    };
    const __m256 p00 = channel(g00), p01 = channel(g01), p10 = channel(g10), p11 = channel(g11);
    const __m256 top = _mm256_fmadd_ps(fx, _mm256_sub_ps(p01, p00), p00);
    const __m256 bottom = _mm256_fmadd_ps(fx, _mm256_sub_ps(p11, p10), p10);
    __m256 v = _mm256_fmadd_ps(fy, _mm256_sub_ps(bottom, top), top);
    v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, _mm256_set1_ps(0.5f)), zero), _mm256_set1_ps(255.0f));
    packed = _mm256_or_si256(packed, _mm256_slli_epi32(_mm256_cvttps_epi32(v), 8 * c));
  }
  alignas(32) uint32_t px[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(px), packed);
  for (int i = 0; i < 8; ++i) std::memcpy(out + 3 * i, &px[i], 3);
  return true;
}
#endif

template <int C>
void warp(ImageView src, MutableImageView dst, const Affine& m, FillMode mode, uint8_t fill_value) {
  uint8_t fill[C];
  for (int c = 0; c < C; ++c) fill[c] = fill_value;
  const float a = static_cast<float>(m.a), d = static_cast<float>(m.d);
  for (int y = 0; y < dst.height; ++y) {
    uint8_t* out = dst.row(y);
    // Each position is computed from the row start (no running sum), in
    // float: integer positions stay exact, so pure flips and quarter/half
    // turns copy pixels unchanged.
    const float row_x = static_cast<float>(m.b * y + m.c), row_y = static_cast<float>(m.e * y + m.f);
    int x = 0;
#if defined(__AVX2__) && defined(__FMA__)
    if constexpr (C == 3) {
      const __m256 steps = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
      for (; x + 8 <= dst.width; x += 8) {
        const __m256 xs = _mm256_add_ps(_mm256_set1_ps(static_cast<float>(x)), steps);
        const __m256 sx = _mm256_fmadd_ps(_mm256_set1_ps(a), xs, _mm256_set1_ps(row_x));
        const __m256 sy = _mm256_fmadd_ps(_mm256_set1_ps(d), xs, _mm256_set1_ps(row_y));
        if (warp8_rgb(src, sx, sy, mode, out + 3 * x)) continue;
        for (int i = x; i < x + 8; ++i)
          warp_pixel<3>(src, mul_add(a, static_cast<float>(i), row_x), mul_add(d, static_cast<float>(i), row_y), mode,
                        fill, out + 3 * i);
      }
    }
#endif
    for (; x < dst.width; ++x)
      warp_pixel<C>(src, mul_add(a, static_cast<float>(x), row_x), mul_add(d, static_cast<float>(x), row_y), mode, fill,
                    out + C * x);
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
