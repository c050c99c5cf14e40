#include "convoy/image/codec.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "codec_internal.h"
#include "convoy/core/error.h"

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

Image decode_image(std::span<const uint8_t> bytes, std::string_view name, const DecodeOptions& options) {
  require(options.channels == 0 || options.channels == 1 || options.channels == 3,
          "decode_image: channels must be 0 (keep), 1 or 3, got " + std::to_string(options.channels));
  if (bytes.empty())
    throw UserError(std::string(name) + ": empty file, not an image; re-export it or set on_bad_example: skip");
  switch (detect_format(bytes)) {
    case ImageFormat::jpeg: return detail::decode_jpeg(bytes, name, options);
    case ImageFormat::png: return detail::decode_png(bytes, name, options);
    case ImageFormat::unknown: break;
  }
  char start[32];
  std::snprintf(start, sizeof start, "0x%02x 0x%02x 0x%02x", bytes[0], bytes.size() > 1 ? bytes[1] : 0,
                bytes.size() > 2 ? bytes[2] : 0);
  throw UserError(std::string(name) + ": not a JPEG or PNG image (it starts with " + start +
                  "); convoy decodes JPEG and PNG files, convert it or set on_bad_example: skip");
}

Image read_image(const std::string& path, const DecodeOptions& options) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw UserError(path + ": cannot open image (" + std::strerror(errno) + "); check the path");
  const std::streamsize size = in.tellg();
  std::vector<uint8_t> bytes(static_cast<std::size_t>(std::max<std::streamsize>(size, 0)));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw UserError(path + ": cannot read image (" + std::strerror(errno) + ")");
  return decode_image(bytes, path, options);
}

}  // namespace convoy::image
