// convoy's own JPEG Huffman decoder (src/image/jpeg_huffman.cpp) against
// libjpeg-turbo's, which it replaces for baseline files: the same pixels at
// every DCT scale and channel count, and the same kind of error for every
// damaged file. Restart-marker fixtures: tests/fixtures/make_jpeg_huffman_fixtures.py.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "convoy/core/error.h"
#include "convoy/image/codec.h"
#include "image/jpeg_huffman.h"
#include "test_helpers.h"
#include "test_image_helpers.h"

namespace convoy {
namespace {

using testing::file_bytes;
using testing::image_fixture;

struct Outcome {
  image::Image image;
  std::string error;  // empty: decoded
};

Outcome decode(const std::vector<uint8_t>& bytes, const image::DecodeOptions& options, bool ours) {
  image::detail::set_fast_huffman_enabled(ours);
  Outcome o;
  try {
    o.image = image::decode_image(bytes, "x.jpg", options);
  } catch (const UserError& e) {
    o.error = e.what();
  }
  image::detail::set_fast_huffman_enabled(true);
  return o;
}

std::vector<std::vector<uint8_t>> baseline_files() {
  std::vector<std::vector<uint8_t>> files;
  for (const char* name :
       {"rgb.jpg", "rgb_444.jpg", "gray.jpg", "restart_blocks.jpg", "restart_rows_422.jpg", "restart_gray_odd.jpg"})
    files.push_back(file_bytes(image_fixture(name)));
  // libjpeg-turbo's own files: odd sizes (partial MCUs), low and high quality.
  for (int channels : {1, 3}) {
    files.push_back(testing::string_bytes(image::encode_jpeg(testing::test_picture(37, 21, channels), 95)));
    files.push_back(testing::string_bytes(image::encode_jpeg(testing::test_picture(203, 131, channels, 7), 40)));
    files.push_back(testing::string_bytes(image::encode_jpeg(testing::test_picture(160, 96, channels, 3), 100)));
  }
  return files;
}

TEST(JpegHuffman, SamePixelsAsLibjpegTurboAtEveryScale) {
  const long uses_before = image::detail::fast_huffman_uses();
  int decodes = 0;
  for (const auto& bytes : baseline_files()) {
    for (int channels : {0, 1, 3}) {
      for (int d : {1, 2, 4, 8}) {
        SCOPED_TRACE(std::to_string(bytes.size()) + " bytes, channels " + std::to_string(channels) + ", 1/" +
                     std::to_string(d));
        // The size hint that makes decode_image pick 1/d.
        const image::Image full = decode(bytes, {.channels = channels}, false).image;
        const image::DecodeOptions scaled{
            .channels = channels, .min_width = (full.width() + d - 1) / d, .min_height = (full.height() + d - 1) / d};
        const Outcome theirs = decode(bytes, d == 1 ? image::DecodeOptions{.channels = channels} : scaled, false);
        const Outcome ours = decode(bytes, d == 1 ? image::DecodeOptions{.channels = channels} : scaled, true);
        ASSERT_EQ(theirs.error, "");
        ASSERT_EQ(ours.error, "");
        EXPECT_EQ(ours.image.width(), (full.width() + d - 1) / d);
        EXPECT_TRUE(testing::same_pixels(ours.image, theirs.image));
        ++decodes;
      }
    }
  }
  // Every one of them really went through our decoder (where it is built).
  EXPECT_EQ(image::detail::fast_huffman_uses() - uses_before,
            image::detail::fast_huffman_available() ? decodes : 0);
}

TEST(JpegHuffman, ProgressiveFilesStayWithLibjpegTurbo) {
  const long uses_before = image::detail::fast_huffman_uses();
  const image::Image im = image::read_image(image_fixture("progressive.jpg"));
  EXPECT_EQ(im.width(), 64);
  EXPECT_EQ(image::detail::fast_huffman_uses(), uses_before);
}

// Damaged files: cut short anywhere, or a byte changed anywhere. Both
// decoders must agree on whether the file is broken, and when it is, ours
// must name the file with the one-line UserError users know.
TEST(JpegHuffman, DamagedFilesFailLikeLibjpegTurbo) {
  int broken = 0, same_message = 0;
  for (const char* name : {"rgb.jpg", "restart_blocks.jpg", "restart_gray_odd.jpg"}) {
    const std::vector<uint8_t> good = file_bytes(image_fixture(name));
    std::vector<std::vector<uint8_t>> damaged;
    for (size_t n = 0; n < good.size(); n += 5) damaged.emplace_back(good.begin(), good.begin() + static_cast<long>(n));
    for (size_t i = 2; i < good.size(); i += 3)
      for (uint8_t mask : {0x01, 0x5a, 0xff}) {
        damaged.push_back(good);
        damaged.back()[i] ^= mask;
      }
    for (const auto& bytes : damaged) {
      for (int d : {1, 4}) {
        const image::DecodeOptions options{.min_width = d == 1 ? 0 : 16, .min_height = d == 1 ? 0 : 12};
        const Outcome theirs = decode(bytes, options, false);
        const Outcome ours = decode(bytes, options, true);
        ASSERT_EQ(theirs.error.empty(), ours.error.empty()) << name << ", " << bytes.size() << " bytes: libjpeg-turbo '"
                                                            << theirs.error << "', ours '" << ours.error << "'";
        if (ours.error.empty()) {
          // Undetected damage (a changed coefficient): the same wrong pixels.
          EXPECT_TRUE(testing::same_pixels(ours.image, theirs.image)) << name;
          continue;
        }
        ++broken;
        same_message += ours.error == theirs.error;
        EXPECT_EQ(ours.error.rfind("x.jpg: ", 0), 0u) << ours.error;
        EXPECT_EQ(ours.error.find('\n'), std::string::npos);
      }
    }
  }
  EXPECT_GT(broken, 100);
  std::printf("%d broken files, %d with libjpeg-turbo's message\n", broken, same_message);
  // The messages are libjpeg's own; they differ only where the two decoders
  // notice the damage at different places (libjpeg-turbo reads ahead).
  EXPECT_GT(same_message, broken * 9 / 10);
}

// In larger files libjpeg-turbo decodes most MCUs on a fast path that reads
// a code found in no Huffman table as a zero, silently (its slow path, near
// the end of the data, reports it). Ours always reports it, as convoy means
// to (jpeg.cpp: damage is an error). Otherwise the same rules hold.
TEST(JpegHuffman, DamagedLargeFilesFailAtLeastWhenLibjpegTurboDoes) {
  const std::vector<uint8_t> good =
      testing::string_bytes(image::encode_jpeg(testing::test_picture(480, 320, 3, 5), 95));
  ASSERT_GT(good.size(), 20000u);  // mostly past libjpeg-turbo's fast-path threshold (512 bytes per block of an MCU)
  int broken = 0, ours_only = 0;
  for (size_t i = 700; i < good.size(); i += 53) {
    for (uint8_t mask : {0x10, 0xff}) {
      std::vector<uint8_t> bytes = good;
      bytes[i] ^= mask;
      const Outcome theirs = decode(bytes, {}, false);
      const Outcome ours = decode(bytes, {}, true);
      if (!theirs.error.empty()) {
        EXPECT_FALSE(ours.error.empty()) << "byte " << i << ": libjpeg-turbo '" << theirs.error << "'";
      } else if (!ours.error.empty()) {
        EXPECT_NE(ours.error.find("(Corrupt JPEG data: bad Huffman code)"), std::string::npos) << ours.error;
      } else {
        EXPECT_TRUE(testing::same_pixels(ours.image, theirs.image)) << "byte " << i;
      }
      broken += !ours.error.empty();
      ours_only += !ours.error.empty() && theirs.error.empty();
    }
  }
  std::printf("%d broken files, %d reported by ours only\n", broken, ours_only);
  EXPECT_GT(broken, 10);
}

}  // namespace
}  // namespace convoy
