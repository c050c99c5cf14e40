// Resize against tf.image.resize and PIL (tests/fixtures/make_image_fixtures.py),
// crops, flips and affine warps with their exact cases.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "convoy/core/error.h"
#include "convoy/image/geometry.h"
#include "test_helpers.h"
#include "test_image_helpers.h"

namespace convoy {
namespace {

using image::Affine;
using image::FillMode;
using image::Image;
using image::ResizeMethod;
using testing::image_array;
using testing::max_abs_diff;
using testing::same_pixels;

Image source() {
  const Tensor& t = image_array("source");
  Image im(64, 48, 3);
  std::copy_n(t.data<uint8_t>().data(), im.bytes(), im.data());
  return im;
}

Image gray_of(const Image& rgb) {
  Image g(rgb.width(), rgb.height(), 1);
  for (std::size_t i = 0; i < g.bytes(); ++i) g.data()[i] = rgb.data()[3 * i + 1];
  return g;
}

// TF computes in float and keeps floats; convoy rounds to bytes: within
// half a level plus float noise, so 1.
TEST(ImageResize, MatchesTensorFlow) {
  const Image src = source();
  for (const auto& [method, name] : {std::pair{ResizeMethod::area, "area"}, {ResizeMethod::bilinear, "bilinear"}})
    for (const auto& [w, h] : {std::pair{23, 17}, {16, 12}, {100, 75}, {80, 20}}) {
      const std::string key = std::string("resize/") + name + "_" + std::to_string(w) + "x" + std::to_string(h);
      SCOPED_TRACE(key);
      EXPECT_LE(max_abs_diff(image::resize(src, w, h, method), image_array(key)), 1.0);
    }
}

TEST(ImageResize, AreaMatchesPilBoxForWholeRatios) {
  EXPECT_LE(max_abs_diff(image::resize(source(), 16, 12, ResizeMethod::area), image_array("pil_box_16x12")), 1.0);
}

TEST(ImageResize, SameSizeCopiesAndGrayWorks) {
  const Image src = source();
  for (ResizeMethod m : {ResizeMethod::area, ResizeMethod::bilinear})
    EXPECT_TRUE(same_pixels(image::resize(src, 64, 48, m), src));
  // One channel follows the same arithmetic as each channel of three.
  const Image g = gray_of(src);
  const Image small = image::resize(g, 23, 17, ResizeMethod::area), small3 = image::resize(src, 23, 17, ResizeMethod::area);
  for (std::size_t i = 0; i < small.bytes(); ++i) ASSERT_EQ(small.data()[i], small3.data()[3 * i + 1]);
  // A flat image stays flat at any size (weights sum to one).
  Image flat(31, 7, 3);
  std::fill_n(flat.data(), flat.bytes(), 200);
  for (ResizeMethod m : {ResizeMethod::area, ResizeMethod::bilinear})
    for (auto [w, h] : {std::pair{5, 3}, {97, 13}, {1, 1}}) {
      const Image r = image::resize(flat, w, h, m);
      EXPECT_TRUE(std::all_of(r.data(), r.data() + r.bytes(), [](uint8_t v) { return v == 200; }));
    }
}

TEST(ImageResize, RejectsMismatchedChannels) {
  Image a(4, 4, 3), b(2, 2, 1);
  EXPECT_NE(testing::error_of([&] { image::resize_into(a, b.view()); }).find("channels"), std::string::npos);
}

TEST(ImageCrop, WindowsAndCover) {
  const Image src = source();
  const Image c = image::crop(src, 10, 5, 20, 8);
  ASSERT_EQ(c.width(), 20);
  for (int y = 0; y < 8; ++y) ASSERT_TRUE(std::equal(c.row(y), c.row(y) + 60, src.row(5 + y) + 30));
  EXPECT_TRUE(same_pixels(image::center_crop(src, 20, 8), image::crop(src, 22, 20, 20, 8)));
  EXPECT_NE(testing::error_of([&] { image::crop(src, 50, 0, 20, 8); }).find("does not fit"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { image::center_crop(src, 65, 8); }).find("resize_cover"), std::string::npos);

  Rng a(3), b(3);
  const Image r1 = image::random_crop(src, 30, 30, a), r2 = image::random_crop(src, 30, 30, b);
  EXPECT_TRUE(same_pixels(r1, r2));  // same seed, same window
  int distinct = 0;
  for (uint64_t s = 0; s < 8; ++s) {
    Rng r(s);
    distinct += !same_pixels(image::random_crop(src, 30, 30, r), r1);
  }
  EXPECT_GT(distinct, 4);

  // Cover: 64x48 into 24x24 scales the height to 24 (width 32) and cuts 4 columns each side.
  const Image cover = image::resize_cover(src, 24, 24);
  EXPECT_TRUE(same_pixels(cover, image::crop(image::resize(src, 32, 24), 4, 0, 24, 24)));
}

TEST(ImageFlip, TwiceIsIdentityAndMirrors) {
  for (int channels : {1, 3}) {
    Image im = testing::test_picture(13, 6, channels);
    const Image original = im.clone();
    image::flip_horizontal(im.view());
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 13; ++x)
        for (int c = 0; c < channels; ++c)
          ASSERT_EQ(im.row(y)[x * channels + c], original.row(y)[(12 - x) * channels + c]);
    image::flip_horizontal(im.view());
    EXPECT_TRUE(same_pixels(im, original));
    image::flip_vertical(im.view());
    ASSERT_TRUE(std::equal(im.row(0), im.row(0) + 13 * channels, original.row(5)));
    image::flip_vertical(im.view());
    EXPECT_TRUE(same_pixels(im, original));
  }
}

TEST(ImageWarp, IdentityAndHalfTurnAreExact) {
  const Image src = source();
  Image out(64, 48, 3);
  for (FillMode fill : {FillMode::constant, FillMode::reflect, FillMode::wrap, FillMode::nearest}) {
    image::warp_affine(src, out.view(), Affine::identity(), fill);
    EXPECT_TRUE(same_pixels(out, src));
    image::warp_affine(src, out.view(), Affine::rotation(0.0, 64, 48), fill);
    EXPECT_TRUE(same_pixels(out, src));
    Image both = src.clone();
    image::flip_horizontal(both.view());
    image::flip_vertical(both.view());
    image::warp_affine(src, out.view(), Affine::rotation(std::numbers::pi, 64, 48), fill);
    EXPECT_TRUE(same_pixels(out, both));
  }
}

// TF's ImageProjectiveTransformV3 on the same picture: bilinear, 0.3 rad.
TEST(ImageWarp, RotationMatchesTensorFlow) {
  const Image src = source();
  Image out(64, 48, 3);
  for (const auto& [fill, name] : {std::pair{FillMode::reflect, "reflect"}, {FillMode::nearest, "nearest"},
                                   {FillMode::constant, "constant"}}) {
    SCOPED_TRACE(name);
    image::warp_affine(src, out.view(), Affine::rotation(0.3, 64, 48), fill, 0);
    EXPECT_LE(max_abs_diff(out, image_array(std::string("rotate/") + name)), 1.0);
  }
}

// RGB warps take a vectorised path (inside the source, and for reflect and
// nearest fills in the corners a rotation uncovers); it must give the very
// bits of the per-pixel path (used for gray images).
TEST(ImageWarp, VectorPathMatchesThePerPixelPath) {
  const Image src = testing::test_picture(61, 47);
  Image out(50, 40, 3), plane_out(50, 40, 1);
  for (FillMode fill : {FillMode::reflect, FillMode::nearest, FillMode::constant, FillMode::wrap}) {
    for (const Affine& m :
         {Affine::rotation(0.37, 61, 47), Affine::rotation(-0.6, 61, 47),
          Affine::zoom(0.7, 0.7, 61, 47).after(Affine::translation(3.3, -2.1)), Affine::zoom(1.6, 1.3, 61, 47),
          Affine::window(5.5, 3.25, 40, 30, 50, 40), Affine::translation(-70.5, 30.25)}) {
      image::warp_affine(src, out.view(), m, fill, 17);
      for (int c = 0; c < 3; ++c) {
        Image plane(61, 47, 1);
        for (std::size_t i = 0; i < plane.bytes(); ++i) plane.data()[i] = src.data()[3 * i + c];
        image::warp_affine(plane, plane_out.view(), m, fill, 17);
        for (std::size_t i = 0; i < plane_out.bytes(); ++i)
          ASSERT_EQ(out.data()[3 * i + c], plane_out.data()[i]) << i << " fill " << static_cast<int>(fill);
      }
    }
  }
}

TEST(ImageWarp, WholePixelShiftsFollowTheFillMode) {
  Image row(4, 1, 1);
  for (int x = 0; x < 4; ++x) row.data()[x] = static_cast<uint8_t>(10 * (x + 1));  // a b c d = 10 20 30 40
  Image out(4, 1, 1);
  auto shifted = [&](double dx, FillMode fill) {
    image::warp_affine(row, out.view(), Affine::translation(dx, 0), fill, 99);
    return std::vector<int>(out.data(), out.data() + 4);
  };
  // Moving the picture right by 2 shows two made-up pixels on the left.
  EXPECT_EQ(shifted(2, FillMode::constant), (std::vector<int>{99, 99, 10, 20}));
  EXPECT_EQ(shifted(2, FillMode::nearest), (std::vector<int>{10, 10, 10, 20}));
  EXPECT_EQ(shifted(2, FillMode::wrap), (std::vector<int>{30, 40, 10, 20}));
  EXPECT_EQ(shifted(2, FillMode::reflect), (std::vector<int>{20, 10, 10, 20}));
  EXPECT_EQ(shifted(-5, FillMode::reflect), (std::vector<int>{30, 20, 10, 10}));  // d c b a | a b c d | d c b a
  EXPECT_EQ(shifted(-4, FillMode::wrap), (std::vector<int>{10, 20, 30, 40}));
}

TEST(ImageWarp, ComposesInOrder) {
  // window then identity = resize's bilinear grid: the window of the whole image at 2x.
  const Image src = source();
  Image out(128, 96, 3);
  image::warp_affine(src, out.view(), Affine::window(0, 0, 64, 48, 128, 96), FillMode::nearest);
  EXPECT_LE(max_abs_diff(out, image::resize(src, 128, 96, ResizeMethod::bilinear)), 1.0);
  // Two quarter turns are a half turn.
  const Affine q = Affine::rotation(std::numbers::pi / 2, 48, 48);
  const Affine h = q.after(q), want = Affine::rotation(std::numbers::pi, 48, 48);
  EXPECT_NEAR(h.a, want.a, 1e-12);
  EXPECT_NEAR(h.c, want.c, 1e-12);
  EXPECT_NEAR(h.f, want.f, 1e-12);
}

}  // namespace
}  // namespace convoy
