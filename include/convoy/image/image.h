#pragma once
// Images as convoy handles them: unsigned bytes, rows top to bottom, pixels
// interleaved (HWC), 1 channel (gray) or 3 (RGB). An Image owns its pixels;
// the views let every operation read from and write into any such buffer
// (an Image, or the u8 [H, W, C] tensor of an Example) without a copy.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "convoy/core/tensor.h"

namespace convoy::image {

// Read-only pixels: `height` rows of `width * channels` bytes, contiguous.
struct ImageView {
  const uint8_t* data = nullptr;
  int width = 0, height = 0, channels = 0;
  std::size_t row_bytes() const { return static_cast<std::size_t>(width) * channels; }
  std::size_t bytes() const { return row_bytes() * height; }
  const uint8_t* row(int y) const { return data + row_bytes() * y; }
};

struct MutableImageView {
  uint8_t* data = nullptr;
  int width = 0, height = 0, channels = 0;
  std::size_t row_bytes() const { return static_cast<std::size_t>(width) * channels; }
  std::size_t bytes() const { return row_bytes() * height; }
  uint8_t* row(int y) const { return data + row_bytes() * y; }
  operator ImageView() const { return {data, width, height, channels}; }
};

class Image {
 public:
  Image() = default;
  // Pixels are left uninitialised (every producer overwrites them all).
  Image(int width, int height, int channels);
  Image(Image&&) noexcept = default;
  Image& operator=(Image&&) noexcept = default;
  Image clone() const;

  int width() const { return width_; }
  int height() const { return height_; }
  int channels() const { return channels_; }
  bool empty() const { return pixels_ == nullptr; }
  uint8_t* data() { return pixels_.get(); }
  const uint8_t* data() const { return pixels_.get(); }
  uint8_t* row(int y) { return view().row(y); }
  const uint8_t* row(int y) const { return view().row(y); }
  std::size_t bytes() const { return view().bytes(); }

  ImageView view() const { return {pixels_.get(), width_, height_, channels_}; }
  MutableImageView view() { return {pixels_.get(), width_, height_, channels_}; }
  operator ImageView() const { return view(); }

 private:
  int width_ = 0, height_ = 0, channels_ = 0;
  std::unique_ptr<uint8_t[]> pixels_;
};

// The u8 [H, W, C] tensor holding a copy of `image` (how images travel in an Example).
Tensor to_tensor(ImageView image);
// A tensor's pixels seen as an image: u8 [H, W, C] with C 1 or 3, or u8
// [H, W] (gray). Throws UserError naming `feature` for any other tensor.
ImageView view_of(const Tensor& t, const std::string& feature = "image");
MutableImageView mutable_view_of(Tensor& t, const std::string& feature = "image");
// A new u8 [height, width, channels] tensor and the view writing into it.
Tensor image_tensor(int width, int height, int channels);

}  // namespace convoy::image
