// Colour adjustments on bytes. Brightness and contrast are one lookup table
// per image; saturation and hue are per-pixel arithmetic.
#include "convoy/image/color.h"

#include <algorithm>
#include <cmath>

#include "convoy/core/error.h"

namespace convoy::image {
namespace {

inline uint8_t to_byte(float v) {
  const int i = static_cast<int>(v + 0.5f);
  return static_cast<uint8_t>(i < 0 ? 0 : (i > 255 ? 255 : i));
}

void apply_table(MutableImageView image, const uint8_t (&table)[256]) {
  uint8_t* p = image.data;
  const std::size_t n = image.bytes();
  for (std::size_t i = 0; i < n; ++i) p[i] = table[p[i]];
}

float mean_gray(ImageView image) {
  const std::size_t pixels = static_cast<std::size_t>(image.width) * image.height;
  uint64_t sum = 0;  // in thousandths, exact
  const uint8_t* p = image.data;
  if (image.channels == 1) {
    for (std::size_t i = 0; i < pixels; ++i) sum += p[i] * 1000u;
  } else {
    for (std::size_t i = 0; i < pixels; ++i, p += 3) sum += p[0] * 299u + p[1] * 587u + p[2] * 114u;
  }
  return static_cast<float>(static_cast<double>(sum) / 1000.0 / static_cast<double>(pixels));
}

}  // namespace

void adjust_brightness(MutableImageView image, float factor) {
  require(factor >= 0, "adjust_brightness: the factor must be >= 0");
  uint8_t table[256];
  for (int v = 0; v < 256; ++v) table[v] = to_byte(v * factor);
  apply_table(image, table);
}

void adjust_contrast(MutableImageView image, float factor) {
  require(factor >= 0, "adjust_contrast: the factor must be >= 0");
  const float mean = mean_gray(image);
  uint8_t table[256];
  for (int v = 0; v < 256; ++v) table[v] = to_byte(mean + factor * (v - mean));
  apply_table(image, table);
}

void adjust_saturation(MutableImageView image, float factor) {
  require(factor >= 0, "adjust_saturation: the factor must be >= 0");
  if (image.channels != 3) return;
  const std::size_t pixels = static_cast<std::size_t>(image.width) * image.height;
  uint8_t* p = image.data;
  for (std::size_t i = 0; i < pixels; ++i, p += 3) {
    const float gray = 0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2];
    for (int c = 0; c < 3; ++c) p[c] = to_byte(gray + factor * (p[c] - gray));
  }
}

void adjust_hue(MutableImageView image, float shift) {
  require(shift >= -0.5f && shift <= 0.5f, "adjust_hue: the shift must be in [-0.5, 0.5]");
  if (image.channels != 3 || shift == 0) return;
  const std::size_t pixels = static_cast<std::size_t>(image.width) * image.height;
  uint8_t* p = image.data;
  for (std::size_t i = 0; i < pixels; ++i, p += 3) {
    const float r = p[0], g = p[1], b = p[2];
    const float mx = std::max({r, g, b}), mn = std::min({r, g, b});
    const float delta = mx - mn;
    if (delta == 0) continue;  // gray: no hue to turn
    // Hue in sixths of a circle, as RGB -> HSV does.
    float h;
    if (mx == r) h = (g - b) / delta;
    else if (mx == g) h = 2 + (b - r) / delta;
    else h = 4 + (r - g) / delta;
    h += shift * 6;
    h -= 6 * std::floor(h / 6);
    // Back to RGB with the same value (mx) and chroma (delta).
    const int sector = std::min(static_cast<int>(h), 5);
    const float f = h - sector;
    const float up = mn + delta * f, down = mx - delta * f;
    float rgb[3];
    switch (sector) {
      case 0: rgb[0] = mx; rgb[1] = up; rgb[2] = mn; break;
      case 1: rgb[0] = down; rgb[1] = mx; rgb[2] = mn; break;
      case 2: rgb[0] = mn; rgb[1] = mx; rgb[2] = up; break;
      case 3: rgb[0] = mn; rgb[1] = down; rgb[2] = mx; break;
      case 4: rgb[0] = up; rgb[1] = mn; rgb[2] = mx; break;
      default: rgb[0] = mx; rgb[1] = mn; rgb[2] = down; break;
    }
    for (int c = 0; c < 3; ++c) p[c] = to_byte(rgb[c]);
  }
}

}  // namespace convoy::image
