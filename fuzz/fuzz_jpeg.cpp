// libFuzzer entry point: arbitrary bytes as a JPEG, decoded twice — with
// convoy's own Huffman decoder (src/image/jpeg_huffman.cpp) and with
// libjpeg-turbo's alone. Decoding may fail only with convoy::UserError; the
// two must agree on whether the file decodes, and then on every pixel.
// The first byte picks the channels and the DCT scale; the rest is the file.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "convoy/core/error.h"
#include "convoy/image/codec.h"
#include "image/jpeg_huffman.h"

namespace {

bool decode(std::span<const uint8_t> bytes, const convoy::image::DecodeOptions& options, bool ours,
            convoy::image::Image* out) {
  convoy::image::detail::set_fast_huffman_enabled(ours);
  try {
    *out = convoy::image::decode_image(bytes, "fuzz.jpg", options);
    return true;
  } catch (const convoy::UserError&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  constexpr int kChannels[3] = {0, 1, 3};
  constexpr int kHint[4] = {0, 1, 24, 48};  // full size, 1/8, and what fits small seeds at 1/2 or 1/4
  convoy::image::DecodeOptions options;
  options.channels = kChannels[data[0] % 3];
  options.min_width = options.min_height = kHint[(data[0] / 3) % 4];
  const std::span<const uint8_t> bytes(data + 1, size - 1);
  convoy::image::Image ours, theirs;
  const bool ok_ours = decode(bytes, options, true, &ours);
  const bool ok_theirs = decode(bytes, options, false, &theirs);
  if (ok_ours != ok_theirs) std::abort();
  if (ok_ours && (ours.bytes() != theirs.bytes() || ours.width() != theirs.width() ||
                  std::memcmp(ours.data(), theirs.data(), ours.bytes()) != 0))
    std::abort();
  return 0;
}
