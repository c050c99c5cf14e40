#include "convoy/image/codec.h"

#include <cstring>

#include "codec_internal.h"
#include "convoy/core/error.h"
#include "convoy/core/untrusted.h"

namespace convoy::image {

namespace detail {

void throw_corrupt(std::string_view name, const char* format, const std::string& why) {
  throw UserError(std::string(name) + ": truncated or corrupt " + format + " (" + why +
                  "); re-export it or set on_bad_example: skip");
}

void check_dimensions(std::string_view name, const char* format, uint64_t width, uint64_t height) {
  constexpr uint64_t kMaxPixels = uint64_t{1} << 28;  // 268 MP, 805 MB as RGB
  if (width == 0 || height == 0 || width > 65535 || height > 65535 || width * height > kMaxPixels)
    throw UserError(std::string(name) + ": the " + format + " header claims " + std::to_string(width) + "x" +
                    std::to_string(height) + " pixels, more than convoy decodes (" + std::to_string(kMaxPixels) +
                    "); it is corrupt or too large, shrink it or set on_bad_example: skip");
}

}  // namespace detail

ImageFormat detect_format(std::span<const uint8_t> b) {
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (b.size() >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return ImageFormat::jpeg;
  if (b.size() >= 8 && std::memcmp(b.data(), kPng, 8) == 0) return ImageFormat::png;
  return ImageFormat::unknown;
}

int jpeg_scale_denominator(int width, int height, const DecodeOptions& o) {
  if (o.min_width <= 0 && o.min_height <= 0) return 1;
  for (int d : {8, 4, 2}) {
    const int w = (width + d - 1) / d, h = (height + d - 1) / d;  // libjpeg rounds up
    if (w >= o.min_width && h >= o.min_height) return d;
  }
  return 1;
}

HeldImage decode_image_held(std::span<const uint8_t> bytes, std::string_view name, const DecodeOptions& options) {
  require(options.channels == 0 || options.channels == 1 || options.channels == 3,
          "decode_image: channels must be 0 (keep), 1 or 3, got " + std::to_string(options.channels));
  if (bytes.empty())
    throw UserError(std::string(name) + ": empty file, not an image; re-export it or set on_bad_example: skip");
  if (bytes.size() > options.max_bytes)
    throw UserError(std::string(name) + ": " + std::to_string(bytes.size()) + " bytes, more than the " +
                    std::to_string(options.max_bytes) + " an image may have (data.max_image_bytes); shrink it, raise "
                    "the limit or set on_bad_example: skip");
  switch (detect_format(bytes)) {
    case ImageFormat::jpeg: return detail::decode_jpeg(bytes, name, options);
    case ImageFormat::png: return detail::decode_png(bytes, name, options);
    case ImageFormat::unknown: break;
  }
  // No byte of the file is shown: a path that led somewhere else must not leak it.
  throw UserError(std::string(name) + ": not a JPEG or PNG image (no JPEG or PNG signature); convoy decodes JPEG "
                  "and PNG files, convert it or set on_bad_example: skip");
}

Image decode_image(std::span<const uint8_t> bytes, std::string_view name, const DecodeOptions& options) {
  return std::move(decode_image_held(bytes, name, options).image);
}

Tensor read_image_file(const std::string& path, uint64_t max_bytes, std::string_view where) {
  Tensor bytes;
  read_file_into(path,
                 {.what = "image",
                  .max_bytes = max_bytes,
                  .pipes = false,  // an image is read at every epoch: a pipe would give it once
                  .limit_key = "data.max_image_bytes",
                  .advice = "shrink it, raise the limit or set on_bad_example: skip"},
                 [&](std::size_t n) {
                   bytes = Tensor(DType::u8, {static_cast<int64_t>(n)});
                   return static_cast<char*>(bytes.raw());
                 },
                 where.empty() ? path : path + " (" + std::string(where) + ")");
  return bytes;
}

Image read_image(const std::string& path, const DecodeOptions& options) {
  const Tensor bytes = read_image_file(path, options.max_bytes);
  return decode_image(bytes.data<uint8_t>(), path, options);
}

}  // namespace convoy::image
