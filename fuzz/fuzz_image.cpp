// decode_image as a whole: arbitrary bytes, whatever format they claim (PNG,
// JPEG or neither), with the channel and size options a pipeline passes. The
// first byte picks the channels and the size hint; the rest is the file.
// Decoding returns an image of the asked channels within convoy's pixel
// limit, or throws UserError; either way the decode budget
// (decode_budget.h) is handed back whole, and a PNG never gets more pixels
// than its compressed bytes can hold (deflate's 1032:1 ratio), so a tiny
// file claiming a huge image is refused before anything is allocated.
#include <cstdint>
#include <span>

#include "convoy/core/error.h"
#include "convoy/image/codec.h"
#include "convoy/image/decode_budget.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  constexpr int kChannels[3] = {0, 1, 3};
  constexpr int kHint[4] = {0, 1, 24, 48};
  convoy::image::DecodeOptions options;
  options.channels = kChannels[data[0] % 3];
  options.min_width = options.min_height = kHint[(data[0] / 3) % 4];
  const std::span<const uint8_t> bytes(data + 1, size - 1);
  try {
    const convoy::image::HeldImage held = convoy::image::decode_image_held(bytes, "fuzz.img", options);
    const convoy::image::Image& image = held.image;
    if (options.channels != 0 && image.channels() != options.channels) __builtin_trap();
    if (uint64_t{static_cast<uint32_t>(image.width())} * static_cast<uint32_t>(image.height()) > (uint64_t{1} << 28))
      __builtin_trap();
    if (convoy::image::detect_format(bytes) == convoy::image::ImageFormat::png &&
        image.bytes() > uint64_t{1032} * 8 * 3 * bytes.size())  // 1-bit gray: 8 pixels a byte, made RGB
      __builtin_trap();
  } catch (const convoy::UserError&) {
  }
  if (convoy::image::decode_budget_stats().in_flight != 0) __builtin_trap();
  return 0;
}
