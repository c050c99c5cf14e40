#pragma once
// Shared by the image tests: fixtures, file bytes and pixel comparisons.
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convoy/image/image.h"
#include "convoy/io/safetensors.h"

namespace convoy::testing {

inline std::string image_fixture(const std::string& name) {
  return std::string(CONVOY_FIXTURES_DIR) + "/images/" + name;
}

inline const io::NamedTensors& image_arrays() {
  static const io::NamedTensors arrays =
      io::read_safetensors(std::string(CONVOY_FIXTURES_DIR) + "/image_fixtures.safetensors");
  return arrays;
}

inline const Tensor& image_array(const std::string& name) {
  const auto& arrays = image_arrays();
  auto it = arrays.find(name);
  if (it == arrays.end()) throw std::runtime_error("fixture array missing: " + name);
  return it->second;
}

inline std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::vector<uint8_t> string_bytes(const std::string& s) { return {s.begin(), s.end()}; }

// The largest |a - b| over all pixels; the shapes must agree.
inline double max_abs_diff(image::ImageView a, const Tensor& b) {
  EXPECT_EQ(b.shape(), (Shape{a.height, a.width, a.channels}));
  if (b.shape() != Shape{a.height, a.width, a.channels}) return 1e9;
  double worst = 0;
  for (std::size_t i = 0; i < a.bytes(); ++i) {
    const double want = b.dtype() == DType::u8 ? b.data<uint8_t>()[i] : b.data<float>()[i];
    worst = std::max(worst, std::abs(a.data[i] - want));
  }
  return worst;
}

inline double max_abs_diff(image::ImageView a, image::ImageView b) {
  EXPECT_TRUE(a.width == b.width && a.height == b.height && a.channels == b.channels);
  double worst = 0;
  for (std::size_t i = 0; i < a.bytes(); ++i) worst = std::max(worst, std::abs(double(a.data[i]) - b.data[i]));
  return worst;
}

inline double mean_abs_diff(image::ImageView a, image::ImageView b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.bytes(); ++i) sum += std::abs(double(a.data[i]) - b.data[i]);
  return sum / static_cast<double>(a.bytes());
}

inline bool same_pixels(image::ImageView a, image::ImageView b) {
  return a.width == b.width && a.height == b.height && a.channels == b.channels &&
         std::equal(a.data, a.data + a.bytes(), b.data);
}

// A deterministic test picture: gradients, hard edges and noise.
inline image::Image test_picture(int width, int height, int channels = 3, uint64_t seed = 1) {
  image::Image im(width, height, channels);
  Rng rng(seed);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c) {
        const double checker = ((x / 16) + (y / 16)) % 2 ? 40 : -40;  // luma edges, as in photos
        const double base = c == 0 ? 128 + 70 * std::sin(x / 9.0) : c == 1 ? 40 + 170.0 * y / height
                                                                        : 110 + 60 * std::cos(y / 13.0);
        const double v = base + checker;
        im.row(y)[x * channels + c] = static_cast<uint8_t>(std::clamp(v + rng.uniform(-5, 5), 0.0, 255.0));
      }
  return im;
}

}  // namespace convoy::testing
