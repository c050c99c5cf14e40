#include "convoy/image/image.h"

#include <cstring>

#include "convoy/core/error.h"

namespace convoy::image {

Image::Image(int width, int height, int channels) : width_(width), height_(height), channels_(channels) {
  require(width > 0 && height > 0 && (channels == 1 || channels == 3),
          "image: " + std::to_string(width) + "x" + std::to_string(height) + "x" + std::to_string(channels) +
              " is not a valid size; images have positive sides and 1 or 3 channels");
  pixels_.reset(new uint8_t[bytes()]);
}

Image Image::clone() const {
  if (empty()) return {};
  Image copy(width_, height_, channels_);
  std::memcpy(copy.data(), data(), bytes());
  return copy;
}

Tensor image_tensor(int width, int height, int channels) {
  return Tensor(DType::u8, {height, width, channels});
}

Tensor to_tensor(ImageView image) {
  Tensor t = image_tensor(image.width, image.height, image.channels);
  std::memcpy(t.raw(), image.data, image.bytes());
  return t;
}

namespace {

template <class View, class T>
View view_impl(T& t, const std::string& feature) {
  const Shape& s = t.shape();
  const bool ok = t.dtype() == DType::u8 &&
                  ((s.size() == 3 && (s[2] == 1 || s[2] == 3)) || s.size() == 2) && !t.empty() && s[0] > 0 && s[1] > 0;
  require(ok, "feature '" + feature + "' is " + dtype_name(t.dtype()) + " " + to_string(s) +
                  ", not an image; image operations take u8 [H, W, C] with C 1 or 3 (decode it with image::decode_map)");
  return View{static_cast<decltype(View::data)>(t.raw()), static_cast<int>(s[1]), static_cast<int>(s[0]),
              s.size() == 3 ? static_cast<int>(s[2]) : 1};
}

}  // namespace

ImageView view_of(const Tensor& t, const std::string& feature) { return view_impl<ImageView>(t, feature); }
MutableImageView mutable_view_of(Tensor& t, const std::string& feature) {
  return view_impl<MutableImageView>(t, feature);
}

}  // namespace convoy::image
