// libFuzzer entry point: arbitrary bytes as a JPEG, decoded twice — with
// convoy's own Huffman decoder (src/image/jpeg_huffman.cpp) and with
// libjpeg-turbo's alone. Decoding may fail only with convoy::UserError; the
// two must agree on whether the file decodes, and then on every pixel. One
// known difference: libjpeg-turbo's fast path decodes a code that is in no
// Huffman table as a zero without a warning (its slow path, near the end of
// the data, reports it); ours always reports it (docs/images.md).
// The first byte picks the channels and the DCT scale; the rest is the file.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "convoy/core/error.h"
#include "convoy/image/codec.h"
#include "image/jpeg_huffman.h"

namespace {

bool decode(std::span<const uint8_t> bytes, const convoy::image::DecodeOptions& options, bool ours,
            convoy::image::Image* out, std::string* error) {
  convoy::image::detail::set_fast_huffman_enabled(ours);
  try {
    *out = convoy::image::decode_image(bytes, "fuzz.jpg", options);
    return true;
  } catch (const convoy::UserError& e) {
    *error = e.what();
    return false;
  }
}

// True when, after the first SOS, some 0xFF is followed by anything but a
// stuffed zero or a restart marker before the file's final EOI.
bool has_stray_marker(std::span<const uint8_t> b) {
  size_t i = 0;
  while (i + 1 < b.size() && !(b[i] == 0xFF && b[i + 1] == 0xDA)) ++i;
  for (i += 2; i + 1 < b.size(); ++i) {
    if (b[i] != 0xFF) continue;
    const uint8_t m = b[i + 1];
    if (m == 0x00 || (m >= 0xD0 && m <= 0xD7)) continue;
    if (m == 0xD9 && i + 2 == b.size()) return false;
    return true;
  }
  return false;
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
  std::string error_ours, error_theirs;
  const bool ok_ours = decode(bytes, options, true, &ours, &error_ours);
  const bool ok_theirs = decode(bytes, options, false, &theirs, &error_theirs);
  if (ok_ours && !ok_theirs) std::abort();
  if (!ok_ours && ok_theirs && error_ours.find("bad Huffman code") == std::string::npos) std::abort();
  if (ok_ours && !has_stray_marker(bytes) &&
      (ours.bytes() != theirs.bytes() || ours.width() != theirs.width() ||
       std::memcmp(ours.data(), theirs.data(), ours.bytes()) != 0))
    std::abort();
  return 0;
}
