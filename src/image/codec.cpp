#include "convoy/image/codec.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
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

namespace {

std::string too_large(uint64_t size, uint64_t max_bytes) {
  return std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
         " an image may have (data.max_image_bytes); shrink it, raise the limit or set on_bad_example: skip";
}

}  // namespace

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
  if (bytes.size() > options.max_bytes) throw UserError(std::string(name) + ": " + too_large(bytes.size(), options.max_bytes));
  switch (detect_format(bytes)) {
    case ImageFormat::jpeg: return detail::decode_jpeg(bytes, name, options);
    case ImageFormat::png: return detail::decode_png(bytes, name, options);
    case ImageFormat::unknown: break;
  }
  // No byte of the file is shown: a path that led somewhere else must not leak it.
  throw UserError(std::string(name) + ": not a JPEG or PNG image (no JPEG or PNG signature); convoy decodes JPEG "
                  "and PNG files, convert it or set on_bad_example: skip");
}

Tensor read_image_file(const std::string& path, uint64_t max_bytes, std::string_view where) {
  const std::string named = where.empty() ? path : path + " (" + std::string(where) + ")";
  // O_NONBLOCK: opening a FIFO named like an image would wait for a writer
  // forever; it opens at once and fstat refuses it (and devices) below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  auto fail = [&](const std::string& why, const char* advice) {
    if (fd >= 0) ::close(fd);
    throw UserError(named + ": " + why + "; " + advice);
  };
  if (fd < 0) fail(std::string("cannot open the image (") + std::strerror(errno) + ")", "check the path");
  struct stat st {};
  if (fstat(fd, &st) != 0) fail(std::string("cannot read the image (") + std::strerror(errno) + ")", "check the file");
  if (!S_ISREG(st.st_mode))
    fail(S_ISDIR(st.st_mode) ? "a folder, not an image file" : "not a regular file (a pipe, socket or device)",
         "name an image file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    throw UserError(named + ": " + too_large(size, max_bytes));
  }
  Tensor bytes(DType::u8, {static_cast<int64_t>(size)});
  auto* out = static_cast<char*>(bytes.raw());
  for (uint64_t done = 0; done < size;) {
    const ssize_t n = ::read(fd, out + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      fail(std::string("cannot read the image (") + (n < 0 ? std::strerror(errno) : "it got shorter") + ")",
           "check the file");
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return bytes;
}

Image read_image(const std::string& path, const DecodeOptions& options) {
  const Tensor bytes = read_image_file(path, options.max_bytes);
  return decode_image(bytes.data<uint8_t>(), path, options);
}

}  // namespace convoy::image
