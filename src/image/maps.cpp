#include "convoy/image/maps.h"

#include <algorithm>

#include "convoy/core/error.h"

namespace convoy::image {
namespace {

const Tensor* find_tensor(const data::Example& e, const std::string& name) {
  for (const auto& [n, t] : e.tensors())
    if (n == name) return &t;
  return nullptr;
}

// What to call inline bytes in a message.
std::string name_of_bytes(const data::Example& e, const std::string& feature) {
  for (const char* key : {"file", "path", "id", "image_id"})
    for (const auto& [n, texts] : e.text_features())
      if (n == key && !texts.empty()) return texts.front();
  return "feature '" + feature + "'";
}

// `e` without tensor feature `name`.
data::Example without(const data::Example& e, const std::string& name) {
  data::Example out;
  for (const auto& [n, t] : e.tensors())
    if (n != name) out.set(n, t);
  for (const auto& [n, texts] : e.text_features()) out.set_texts(n, texts);
  return out;
}

Tensor fit_into_tensor(const Image& decoded, const DecodeMapOptions& o) {
  if (o.width == 0 && o.height == 0) return to_tensor(decoded);
  if (o.fit == Fit::cover) return to_tensor(resize_cover(decoded, o.width, o.height, o.method));
  Tensor out = image_tensor(o.width, o.height, decoded.channels());
  resize_into(decoded, mutable_view_of(out), o.method);
  return out;
}

}  // namespace

data::MapFn decode_map(std::string from, std::string to, DecodeMapOptions o) {
  require(o.channels == 0 || o.channels == 1 || o.channels == 3,
          "decode_map: channels must be 0 (the file's), 1 or 3, got " + std::to_string(o.channels));
  require(o.width >= 0 && o.height >= 0 && (o.width == 0) == (o.height == 0),
          "decode_map: give both width and height (or neither, to keep each image's size)");
  return [from = std::move(from), to = std::move(to), o](data::Example e, Rng&) {
    const DecodeOptions decode{
        .channels = o.channels, .min_width = o.width, .min_height = o.height, .max_bytes = o.max_bytes};
    if (const Tensor* bytes = find_tensor(e, from)) {
      require(bytes->dtype() == DType::u8 && bytes->shape().size() == 1,
              "decode_map: feature '" + from + "' is " + dtype_name(bytes->dtype()) + " " + to_string(bytes->shape()) +
                  "; encoded images are u8 [N] tensors (or a text path)");
      const auto span = bytes->data<uint8_t>();
      // The full-size pixels stay within the decode budget until resized.
      Tensor pixels = fit_into_tensor(decode_image_held(span, name_of_bytes(e, from), decode).image, o);
      if (from != to) e = without(e, from);
      e.set(to, std::move(pixels));
      return e;
    }
    const std::string& path = e.text(from);  // names the features there are when `from` is missing
    const Tensor bytes = read_image_file(path, decode.max_bytes);
    e.set(to, fit_into_tensor(decode_image_held(bytes.data<uint8_t>(), path, decode).image, o));
    return e;
  };
}

data::MapFn resize_map(std::string feature, int width, int height, ResizeMethod method) {
  require(width > 0 && height > 0, "resize_map: width and height must be positive");
  return [feature = std::move(feature), width, height, method](data::Example e, Rng&) {
    const ImageView src = view_of(e.tensor(feature), feature);
    Tensor out = image_tensor(width, height, src.channels);
    resize_into(src, mutable_view_of(out), method);
    e.set(feature, std::move(out));
    return e;
  };
}

data::MapFn augment(AugmentOptions options, std::string feature) {
  validate(options);
  return [feature = std::move(feature), options](data::Example e, Rng& rng) {
    const Tensor& in = e.tensor(feature);
    const ImageView src = view_of(in, feature);
    Tensor out(DType::u8, in.shape());  // the input's shape, [H, W] or [H, W, C]
    augment_into(src, mutable_view_of(out, feature), options, rng);
    e.set(feature, std::move(out));
    return e;
  };
}

data::MapFn to_float_chw(std::vector<float> mean, std::vector<float> std, std::string feature) {
  require(!mean.empty() && mean.size() == std.size() && mean.size() <= 3,
          "to_float_chw: give one mean and one std per channel (or one of each for all channels)");
  for (float s : std) require(s > 0, "to_float_chw: std must be positive, got " + std::to_string(s));
  return [mean = std::move(mean), std = std::move(std), feature = std::move(feature)](data::Example e, Rng&) {
    const ImageView src = view_of(e.tensor(feature), feature);
    const int C = src.channels;
    require(mean.size() == 1 || static_cast<int>(mean.size()) == C,
            "to_float_chw: " + std::to_string(mean.size()) + " means for an image of " + std::to_string(C) +
                " channels in '" + feature + "'");
    // One table per channel: exactly (v / 255 - mean) / std for each byte.
    float table[3][256];
    for (int c = 0; c < C; ++c) {
      const float m = mean[mean.size() == 1 ? 0 : c], s = std[std.size() == 1 ? 0 : c];
      for (int v = 0; v < 256; ++v) table[c][v] = (static_cast<float>(v) / 255.0f - m) / s;
    }
    Tensor out(DType::f32, {C, src.height, src.width});
    float* dst = out.data<float>().data();
    const std::size_t plane = static_cast<std::size_t>(src.width) * src.height;
    const uint8_t* p = src.data;
    if (C == 1) {
      for (std::size_t i = 0; i < plane; ++i) dst[i] = table[0][p[i]];
    } else {
      for (std::size_t i = 0; i < plane; ++i, p += 3) {
        dst[i] = table[0][p[0]];
        dst[plane + i] = table[1][p[1]];
        dst[2 * plane + i] = table[2][p[2]];
      }
    }
    e.set(feature, std::move(out));
    return e;
  };
}

}  // namespace convoy::image
