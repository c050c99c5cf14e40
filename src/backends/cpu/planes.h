#pragma once
// NHWC pixels to channel planes and back (PlanarConv's rows, DirectConv's
// forward over pixels), 8 × 8 blocks transposed in registers where the
// copy has AVX2, else a float at a time: data movement only, the same
// values in every copy.
#include <algorithm>
#include <cstdint>

#include "backends/cpu/simd.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace convoy::cpu {

#if defined(__AVX2__)
// out[j * out_stride + i] = in[i * in_stride + j] for an 8 × 8 block: data
// movement only, the same values in every copy that has it.
inline void transpose8x8(const float* in, int64_t in_stride, float* out, int64_t out_stride) {
  __m256 r[8], t[8], s[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(in + i * in_stride);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(out + j * out_stride, _mm256_permute2f128_ps(s[j], s[j + 4], 0x20));
    _mm256_storeu_ps(out + (j + 4) * out_stride, _mm256_permute2f128_ps(s[j], s[j + 4], 0x31));
  }
}
constexpr bool kTranspose8 = true;
#else
inline void transpose8x8(const float*, int64_t, float*, int64_t) {}
constexpr bool kTranspose8 = false;
#endif

// out[j * out_stride + i] = in[i * in_stride + j] for i < rows, j < cols.
// Where both are 8 or more, by 8 × 8 blocks, the last block of each side
// overlapping the one before (the same values written twice) rather than a
// float at a time for the rest (at the seed CNN's 12-wide maps, a third of
// each row); else a float at a time. In and out must not overlap.
inline void transpose(const float* in, int64_t in_stride, int64_t rows, int64_t cols, float* out, int64_t out_stride) {
  if (kTranspose8 && rows >= 8 && cols >= 8) {
    for (int64_t i0 = 0; i0 < rows; i0 += 8)
      for (int64_t j0 = 0; j0 < cols; j0 += 8) {
        const int64_t i = std::min(i0, rows - 8), j = std::min(j0, cols - 8);
        transpose8x8(in + i * in_stride + j, in_stride, out + j * out_stride + i, out_stride);
      }
    return;
  }
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[j * out_stride + i] = in[i * in_stride + j];
}

// planes[c * plane + p] = pixels[p * channels + c] for p < count: one row of
// an NHWC image spread over channel planes.
inline void to_planes(const float* pixels, int64_t count, int64_t channels, float* planes, int64_t plane) {
  if (channels == 1) simd::copy_row(pixels, count, planes);
  else transpose(pixels, channels, count, channels, planes, plane);
}

// The inverse: pixels[p * channels + c] = planes[c * plane + p] for p < count.
inline void from_planes(const float* planes, int64_t plane, int64_t count, int64_t channels, float* pixels) {
  if (channels == 1) simd::copy_row(planes, count, pixels);
  else transpose(planes, plane, channels, count, pixels, channels);
}

}  // namespace convoy::cpu
