// Crops and flips: byte copies, no resampling.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "convoy/core/error.h"
#include "convoy/image/geometry.h"

namespace convoy::image {

Image crop(ImageView src, int x, int y, int width, int height) {
  require(width > 0 && height > 0 && x >= 0 && y >= 0 && x + width <= src.width && y + height <= src.height,
          "crop: the window " + std::to_string(width) + "x" + std::to_string(height) + " at (" + std::to_string(x) +
              ", " + std::to_string(y) + ") does not fit in a " + std::to_string(src.width) + "x" +
              std::to_string(src.height) + " image");
  Image out(width, height, src.channels);
  for (int r = 0; r < height; ++r)
    std::memcpy(out.row(r), src.row(y + r) + static_cast<std::size_t>(x) * src.channels, out.view().row_bytes());
  return out;
}

Image center_crop(ImageView src, int width, int height) {
  require(width <= src.width && height <= src.height,
          "center_crop: " + std::to_string(width) + "x" + std::to_string(height) + " is larger than the " +
              std::to_string(src.width) + "x" + std::to_string(src.height) + " image; resize it first (resize_cover)");
  return crop(src, (src.width - width) / 2, (src.height - height) / 2, width, height);
}

Image random_crop(ImageView src, int width, int height, Rng& rng) {
  require(width <= src.width && height <= src.height,
          "random_crop: " + std::to_string(width) + "x" + std::to_string(height) + " is larger than the " +
              std::to_string(src.width) + "x" + std::to_string(src.height) + " image; resize it first (resize_cover)");
  const int x = static_cast<int>(rng.below(static_cast<uint64_t>(src.width - width) + 1));
  const int y = static_cast<int>(rng.below(static_cast<uint64_t>(src.height - height) + 1));
  return crop(src, x, y, width, height);
}

Image resize_cover(ImageView src, int width, int height, ResizeMethod method) {
  require(width > 0 && height > 0, "resize_cover: the target size must be positive");
  const double scale = std::max(static_cast<double>(width) / src.width, static_cast<double>(height) / src.height);
  const int w = std::max(width, static_cast<int>(std::lround(src.width * scale)));
  const int h = std::max(height, static_cast<int>(std::lround(src.height * scale)));
  if (w == width && h == height) return resize(src, width, height, method);
  return center_crop(resize(src, w, h, method), width, height);
}

void flip_horizontal(MutableImageView image) {
  const int C = image.channels, W = image.width;
  thread_local std::vector<uint8_t> tmp;
  tmp.resize(image.row_bytes());
  for (int y = 0; y < image.height; ++y) {
    uint8_t* row = image.row(y);
    if (C == 1) {
      std::reverse(row, row + W);
      continue;
    }
    for (int x = 0; x < W; ++x) std::memcpy(tmp.data() + 3 * x, row + 3 * (W - 1 - x), 3);
    std::memcpy(row, tmp.data(), image.row_bytes());
  }
}

void flip_vertical(MutableImageView image) {
  const std::size_t n = image.row_bytes();
  std::vector<uint8_t> tmp(n);
  for (int t = 0, b = image.height - 1; t < b; ++t, --b) {
    std::memcpy(tmp.data(), image.row(t), n);
    std::memcpy(image.row(t), image.row(b), n);
    std::memcpy(image.row(b), tmp.data(), n);
  }
}

}  // namespace convoy::image
