// Decoding and encoding JPEG/PNG against PIL's pixels
// (tests/fixtures/make_image_fixtures.py), the DCT scaling rule, and one
// clear UserError per broken file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>

#include "convoy/core/error.h"
#include "convoy/image/codec.h"
#include "convoy/image/geometry.h"
#include "test_helpers.h"
#include "test_image_helpers.h"

namespace convoy {
namespace {

using image::DecodeOptions;
using testing::error_of;
using testing::file_bytes;
using testing::image_array;
using testing::image_fixture;
using testing::max_abs_diff;

// libjpeg-turbo 2.1 here and the one inside PIL's wheel use the same
// accurate integer IDCT, but SIMD and C versions of the upsampling and
// colour conversion may round differently: allow 2 levels for JPEG.
constexpr double kJpegTolerance = 2;

TEST(ImageCodec, DecodesEveryFixtureLikePil) {
  for (const char* name : {"rgb.jpg", "rgb_444.jpg", "progressive.jpg", "gray.jpg", "rgb.png", "gray.png", "bw1.png",
                           "palette.png", "rgba.png", "gray16.png", "interlaced.png"}) {
    SCOPED_TRACE(name);
    const image::Image im = image::read_image(image_fixture(name));
    const bool jpeg = std::string(name).ends_with(".jpg");
    EXPECT_LE(max_abs_diff(im, image_array(std::string("decoded/") + name)), jpeg ? kJpegTolerance : 0);
  }
}

// A CMYK JPEG (Adobe's inverted inks, what PIL and Photoshop write) decodes
// to the RGB that TensorFlow's decode_jpeg gives a Keras pipeline
// (tests/fixtures/make_cmyk_jpeg_fixture.py), and to one gray channel on request.
TEST(ImageCodec, DecodesACmykJpegAsTensorFlowDoes) {
  const image::Image rgb = image::read_image(image_fixture("cmyk.jpg"));
  const image::Image want = image::read_image(image_fixture("cmyk_tf.png"));
  EXPECT_EQ(rgb.channels(), 3);
  EXPECT_LE(max_abs_diff(rgb, want), kJpegTolerance);
  const image::Image gray = image::read_image(image_fixture("cmyk.jpg"), {.channels = 1});
  const image::Image want_gray = image::read_image(image_fixture("cmyk_tf.png"), {.channels = 1});
  EXPECT_EQ(gray.channels(), 1);
  EXPECT_LE(max_abs_diff(gray, want_gray), kJpegTolerance + 1);
}

TEST(ImageCodec, ConvertsChannelsOnRequest) {
  // Colour to gray: libjpeg takes the file's luma, PIL converts decoded RGB
  // (0.299, 0.587, 0.114): the two differ by the chroma rounding, up to 4 levels.
  const image::Image gray = image::read_image(image_fixture("rgb.jpg"), {.channels = 1});
  EXPECT_LE(max_abs_diff(gray, image_array("decoded_gray/rgb.jpg")), 4);
  const image::Image png_gray = image::read_image(image_fixture("rgb.png"), {.channels = 1});
  EXPECT_EQ(png_gray.channels(), 1);
  EXPECT_LE(max_abs_diff(png_gray, image_array("decoded/gray.png")), 1);  // PIL's convert("L") of the same pixels
  // Gray to RGB repeats the value.
  for (const char* name : {"gray.jpg", "gray.png"}) {
    const image::Image one = image::read_image(image_fixture(name));
    const image::Image three = image::read_image(image_fixture(name), {.channels = 3});
    ASSERT_EQ(three.channels(), 3);
    for (std::size_t i = 0; i < one.bytes(); ++i)
      for (int c = 0; c < 3; ++c) ASSERT_EQ(three.data()[3 * i + c], one.data()[i]) << name;
  }
}

TEST(ImageCodec, ScaleDenominatorIsTheLargestThatKeepsTheTarget) {
  EXPECT_EQ(image::jpeg_scale_denominator(2048, 1365, {.min_width = 224, .min_height = 224}), 4);  // 512x342
  EXPECT_EQ(image::jpeg_scale_denominator(2048, 1365, {.min_width = 256, .min_height = 171}), 8);  // exactly 1/8
  EXPECT_EQ(image::jpeg_scale_denominator(2048, 1365, {.min_width = 257, .min_height = 171}), 4);
  EXPECT_EQ(image::jpeg_scale_denominator(600, 400, {.min_width = 300, .min_height = 200}), 2);
  EXPECT_EQ(image::jpeg_scale_denominator(600, 400, {.min_width = 301, .min_height = 200}), 1);
  EXPECT_EQ(image::jpeg_scale_denominator(600, 400, {}), 1);                       // no hint: full size
  EXPECT_EQ(image::jpeg_scale_denominator(600, 400, {.min_width = 10}), 8);        // one side given
  EXPECT_EQ(image::jpeg_scale_denominator(100, 100, {.min_width = 500, .min_height = 500}), 1);  // enlarging
}

TEST(ImageCodec, ScaledJpegMatchesPilDraft) {
  const image::Image half = image::read_image(image_fixture("rgb.jpg"), {.min_width = 32, .min_height = 24});
  EXPECT_LE(max_abs_diff(half, image_array("draft2/rgb.jpg")), kJpegTolerance);
  // PNG has no DCT: the hint is ignored.
  EXPECT_EQ(image::read_image(image_fixture("rgb.png"), {.min_width = 8, .min_height = 8}).width(), 64);
}

TEST(ImageCodec, DctScalingIsCloseToFullDecodeThenAreaResize) {
  const image::Image big = testing::test_picture(512, 384);
  const std::string jpeg = image::encode_jpeg(big, 95);
  const auto bytes = testing::string_bytes(jpeg);
  for (int d : {2, 4, 8}) {
    SCOPED_TRACE(d);
    const int w = 512 / d, h = 384 / d;
    const image::Image scaled = image::decode_image(bytes, "big.jpg", {.min_width = w, .min_height = h});
    ASSERT_EQ(scaled.width(), w);
    ASSERT_EQ(scaled.height(), h);
    const image::Image reference = image::resize(image::decode_image(bytes, "big.jpg"), w, h);
    // Both are low-pass versions of the same picture; they differ at hard edges only.
    EXPECT_LT(testing::mean_abs_diff(scaled, reference), 1.0);
    EXPECT_LT(max_abs_diff(scaled, reference), 24);
  }
}

TEST(ImageCodec, PngRoundTripIsExact) {
  for (int channels : {1, 3}) {
    const image::Image im = testing::test_picture(37, 21, channels);
    const image::Image back = image::decode_image(testing::string_bytes(image::encode_png(im)), "x.png");
    EXPECT_TRUE(testing::same_pixels(im, back));
  }
}

TEST(ImageCodec, JpegRoundTripIsClose) {
  for (int channels : {1, 3}) {
    const image::Image im = testing::test_picture(64, 40, channels);
    const image::Image back = image::decode_image(testing::string_bytes(image::encode_jpeg(im, 95)), "x.jpg");
    ASSERT_EQ(back.channels(), channels);
    EXPECT_LT(testing::mean_abs_diff(im, back), 3.0);
  }
}

TEST(ImageCodec, TruncatedJpegNamesTheFile) {
  auto bytes = file_bytes(image_fixture("rgb.jpg"));
  bytes.resize(bytes.size() / 2);
  const std::string msg = error_of([&] { image::decode_image(bytes, "images/Train_7.jpg"); });
  EXPECT_EQ(msg,
            "images/Train_7.jpg: truncated or corrupt JPEG (Premature end of JPEG file); re-export it or set "
            "on_bad_example: skip");
  // Missing only the end-of-image marker is still truncated.
  auto most = file_bytes(image_fixture("rgb.jpg"));
  most.resize(most.size() - 2);
  EXPECT_NE(error_of([&] { image::decode_image(most, "a.jpg"); }).find("a.jpg: truncated or corrupt JPEG"),
            std::string::npos);
  // So is a file cut inside its header.
  auto header = file_bytes(image_fixture("rgb.jpg"));
  header.resize(100);
  EXPECT_NE(error_of([&] { image::decode_image(header, "b.jpg"); }).find("b.jpg: truncated or corrupt JPEG"),
            std::string::npos);
}

TEST(ImageCodec, CorruptPngNamesTheFile) {
  auto bytes = file_bytes(image_fixture("rgb.png"));
  bytes[bytes.size() / 2] ^= 0x5a;  // inside IDAT: the zlib stream breaks
  const std::string msg = error_of([&] { image::decode_image(bytes, "leaf.png"); });
  EXPECT_NE(msg.find("leaf.png: truncated or corrupt PNG ("), std::string::npos) << msg;
  auto cut = file_bytes(image_fixture("rgb.png"));
  cut.resize(cut.size() / 2);
  EXPECT_NE(error_of([&] { image::decode_image(cut, "cut.png"); }).find("cut.png: truncated or corrupt PNG"),
            std::string::npos);
}

TEST(ImageCodec, EmptyOrForeignBytesNameTheFile) {
  EXPECT_EQ(error_of([] { image::decode_image({}, "empty.jpg"); }),
            "empty.jpg: empty file, not an image; re-export it or set on_bad_example: skip");
  const auto html = testing::string_bytes("<html>not found</html>");
  const std::string msg = error_of([&] { image::decode_image(html, "x.jpg"); });
  EXPECT_NE(msg.find("x.jpg: not a JPEG or PNG image (no JPEG or PNG signature)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("0x3c"), std::string::npos) << "the message shows none of the file's bytes: " << msg;
  EXPECT_NE(error_of([] { image::read_image("/nonexistent/a.jpg"); }).find("/nonexistent/a.jpg: cannot open the image"),
            std::string::npos);
}

TEST(ImageCodec, AbsurdHeaderSizeIsRefusedBeforeAllocating) {
  // A PNG header claiming 60000 x 60000 pixels (3.6 G pixels).
  auto bytes = file_bytes(image_fixture("gray.png"));
  const uint8_t big[4] = {0, 0, 0xea, 0x60};
  std::copy(big, big + 4, bytes.begin() + 16);
  std::copy(big, big + 4, bytes.begin() + 20);
  const std::string msg = error_of([&] { image::decode_image(bytes, "huge.png"); });
  EXPECT_NE(msg.find("huge.png:"), std::string::npos) << msg;
}

// Most palette PNGs carry a tRNS chunk (a transparent index); expanding the
// palette turns it into an alpha channel. It is dropped as PIL's
// convert("RGB") drops it: the same pixels as without the chunk, not "corrupt".
TEST(ImageCodec, PaletteTransparencyIsDroppedNotRefused) {
  const auto plain = file_bytes(image_fixture("palette.png"));
  auto with_trns = plain;
  const std::string idat = "IDAT";
  const auto at = std::search(with_trns.begin(), with_trns.end(), idat.begin(), idat.end()) - 4;  // its length field
  const std::vector<uint8_t> body = {'t', 'R', 'N', 'S', 0, 128};  // index 0 clear, index 1 half
  std::vector<uint8_t> chunk = {0, 0, 0, 2};
  chunk.insert(chunk.end(), body.begin(), body.end());
  const uint32_t crc = static_cast<uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size())));
  for (int shift = 24; shift >= 0; shift -= 8) chunk.push_back(static_cast<uint8_t>(crc >> shift));
  with_trns.insert(at, chunk.begin(), chunk.end());
  for (int channels : {0, 1, 3}) {
    SCOPED_TRACE(channels);
    const image::Image expected = image::decode_image(plain, "palette.png", {.channels = channels});
    const image::Image got = image::decode_image(with_trns, "palette_trns.png", {.channels = channels});
    ASSERT_EQ(got.channels(), expected.channels());
    EXPECT_EQ(max_abs_diff(got, expected), 0);
  }
}

// A progressive JPEG is decoded through full-size coefficients whatever scale
// it is read at: its header's size counts, not the scaled one (60000 x 60000
// read at 1/8 would pass as 7500 x 7500 and then take ~20 GB).
TEST(ImageCodec, AProgressiveJpegIsHeldToThePixelLimitAtItsFullSize) {
  auto bytes = file_bytes(image_fixture("progressive.jpg"));
  const uint8_t sof2[2] = {0xff, 0xc2};
  const auto sof = std::search(bytes.begin(), bytes.end(), sof2, sof2 + 2);
  ASSERT_NE(sof, bytes.end());
  const uint8_t size[4] = {0xea, 0x60, 0xea, 0x60};  // height, width: 60000 each
  std::copy(size, size + 4, sof + 5);
  const std::string msg =
      error_of([&] { image::decode_image(bytes, "bomb.jpg", {.min_width = 16, .min_height = 16}); });
  EXPECT_NE(msg.find("bomb.jpg: the JPEG header claims 60000x60000 pixels, more than convoy decodes"),
            std::string::npos)
      << msg;
}

// Damaged files of every kind either decode (to some pixels) or throw one
// UserError naming the file: never a crash, a hang or another exception
// (the CI runs this under AddressSanitizer).
TEST(ImageCodec, RandomDamageIsDecodedOrRefusedCleanly) {
  Rng rng(9);
  for (const char* name : {"rgb.jpg", "progressive.jpg", "rgb.png", "palette.png", "interlaced.png"}) {
    const auto original = file_bytes(image_fixture(name));
    int refused = 0;
    for (int trial = 0; trial < 60; ++trial) {
      auto bytes = original;
      const int flips = 1 + static_cast<int>(rng.below(4));
      for (int f = 0; f < flips; ++f) bytes[3 + rng.below(bytes.size() - 3)] = static_cast<uint8_t>(rng.below(256));
      if (trial % 3 == 0) bytes.resize(3 + rng.below(bytes.size() - 3));
      try {
        const image::Image im = image::decode_image(bytes, "damaged", {.channels = trial % 2 ? 1 : 0});
        EXPECT_FALSE(im.empty());
      } catch (const UserError& e) {
        EXPECT_EQ(std::string(e.what()).rfind("damaged: ", 0), 0u) << e.what();
        ++refused;
      }
    }
    EXPECT_GT(refused, 10) << name;  // truncation alone is refused a third of the time
  }
}

TEST(ImageCodec, RejectsBadChannelRequest) {
  EXPECT_NE(error_of([] { image::read_image(image_fixture("rgb.png"), {.channels = 2}); }).find("channels"),
            std::string::npos);
}

}  // namespace
}  // namespace convoy
