#pragma once
// NHWC pixels to channel planes and back (PlanarConv's rows, DirectConv's
// forward over pixels), 8 × 8 blocks transposed in registers where the
// copy has AVX2, the rest a float at a time: data movement only, the same
// values in every copy.
#include <algorithm>
#include <cstdint>

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

// planes[c * plane + p] = pixels[p * channels + c] for p < count: one row of
// an NHWC image spread over channel planes.
inline void to_planes(const float* pixels, int64_t count, int64_t channels, float* planes, int64_t plane) {
  if (channels == 1) {
    std::copy_n(pixels, count, planes);
    return;
  }
  int64_t p = 0;
  if (kTranspose8 && channels >= 8)
    for (; p + 8 <= count; p += 8)
      for (int64_t c0 = 0; c0 < channels; c0 += 8) {
        const int64_t c = std::min(c0, channels - 8);  // the last block may overlap the one before: same values
        transpose8x8(pixels + p * channels + c, channels, planes + c * plane + p, plane);
      }
  for (; p < count; ++p)
    for (int64_t c = 0; c < channels; ++c) planes[c * plane + p] = pixels[p * channels + c];
}

// The inverse: pixels[p * channels + c] = planes[c * plane + p] for p < count.
inline void from_planes(const float* planes, int64_t plane, int64_t count, int64_t channels, float* pixels) {
  if (channels == 1) {
    std::copy_n(planes, count, pixels);
    return;
  }
  int64_t p = 0;
  if (kTranspose8 && channels >= 8)
    for (; p + 8 <= count; p += 8)
      for (int64_t c0 = 0; c0 < channels; c0 += 8) {
        const int64_t c = std::min(c0, channels - 8);
        transpose8x8(planes + c * plane + p, plane, pixels + p * channels + c, channels);
      }
  for (; p < count; ++p)
    for (int64_t c = 0; c < channels; ++c) pixels[p * channels + c] = planes[c * plane + p];
}

}  // namespace convoy::cpu
