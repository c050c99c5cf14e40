#pragma once
// Decoding and encoding JPEG and PNG.
//
// JPEG goes through libjpeg-turbo. When the caller says how small the image
// will be made (min_width/min_height), the decoder shrinks it in the DCT
// domain by 1/2, 1/4 or 1/8 — the largest of those that still leaves at
// least min_width x min_height — which skips most of the inverse DCT and
// colour conversion: the main speed lever for photos larger than the
// training size. PNG goes through libpng (1-16 bit, gray, palette; alpha is
// dropped, 16-bit samples keep their high byte).
//
// Every failure is a UserError naming the file: an empty file, bytes that
// are neither JPEG nor PNG, a truncated or corrupt file (libjpeg's "premature
// end of data" and corrupt-data warnings count as errors).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "convoy/core/tensor.h"
#include "convoy/image/decode_budget.h"
#include "convoy/image/image.h"

namespace convoy::image {

enum class ImageFormat { unknown, jpeg, png };

// By magic bytes, not by the file's name.
ImageFormat detect_format(std::span<const uint8_t> bytes);

// The most bytes one encoded image may have (data.max_image_bytes): a larger
// file is refused before any of it is read.
inline constexpr uint64_t kDefaultMaxImageBytes = uint64_t{64} << 20;

struct DecodeOptions {
  int channels = 0;    // 0: the file's (gray stays 1, colour becomes 3), 1: gray, 3: RGB
  int min_width = 0;   // a hint: the image will be resized to at least this;
  int min_height = 0;  // 0 = no constraint in that dimension (both 0: full size)
  uint64_t max_bytes = kDefaultMaxImageBytes;  // of the encoded file
};

// The DCT scale denominator (1, 2, 4 or 8) decode_image uses for a JPEG of
// width x height: the largest d with ceil(width / d) >= min_width and
// ceil(height / d) >= min_height.
int jpeg_scale_denominator(int width, int height, const DecodeOptions& options);

// A decoded image and its share of the process-wide decode budget
// (decode_budget.h), held until the full-size pixels are let go: a caller
// that resizes keeps `held` until it has the small copy.
struct HeldImage {
  Image image;
  DecodeReservation held;
};

// `name` is only for messages (the file's path, or a record's key). The
// decode waits for its bytes of the decode budget before it allocates.
HeldImage decode_image_held(std::span<const uint8_t> bytes, std::string_view name, const DecodeOptions& options = {});
Image decode_image(std::span<const uint8_t> bytes, std::string_view name, const DecodeOptions& options = {});
// Reads and decodes a file; errors name `path`.
Image read_image(const std::string& path, const DecodeOptions& options = {});
// An image file's bytes, u8 [size]: a UserError naming `path` (and `where`,
// e.g. "train.csv line 7") when it cannot be read or holds more than
// `max_bytes`, checked before reading. Every reader of image files uses it.
Tensor read_image_file(const std::string& path, uint64_t max_bytes = kDefaultMaxImageBytes,
                       std::string_view where = {});

// The file's bytes (baseline JPEG, 4:2:0 for colour, like PIL's defaults).
std::string encode_jpeg(ImageView image, int quality = 90);
std::string encode_png(ImageView image);

}  // namespace convoy::image
