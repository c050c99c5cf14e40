// Augmentation: fixed output size, same seed -> same pixels, the exact
// cases (flip twice, no-op factors), and the pipeline maps around it.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "convoy/core/error.h"
#include "convoy/data/dataset.h"
#include "convoy/image/augment.h"
#include "convoy/image/color.h"
#include "convoy/image/maps.h"
#include "test_helpers.h"
#include "test_image_helpers.h"

namespace convoy {
namespace {

using image::AugmentOptions;
using image::Image;
using testing::same_pixels;

// One option set per augmentation, each alone.
std::vector<std::pair<std::string, AugmentOptions>> each_augmentation() {
  return {{"horizontal_flip", {.horizontal_flip = true}},
          {"vertical_flip", {.vertical_flip = true}},
          {"crop", {.crop_area = 0.5f}},
          {"rotation reflect", {.rotation = 0.1f}},
          {"rotation constant", {.rotation = 0.1f, .fill_mode = image::FillMode::constant}},
          {"rotation wrap", {.rotation = 0.1f, .fill_mode = image::FillMode::wrap}},
          {"rotation nearest", {.rotation = 0.1f, .fill_mode = image::FillMode::nearest}},
          {"zoom", {.zoom = 0.3f}},
          {"translate", {.translate = 0.2f}},
          {"brightness", {.brightness = 0.4f}},
          {"contrast", {.contrast = 0.4f}},
          {"saturation", {.saturation = 0.5f}},
          {"hue", {.hue = 0.2f}},
          {"cutout", {.cutout = 2}},
          {"everything",
           {.horizontal_flip = true, .vertical_flip = true, .crop_area = 0.6f, .rotation = 0.2f, .zoom = 0.2f,
            .translate = 0.1f, .brightness = 0.2f, .contrast = 0.2f, .saturation = 0.2f, .hue = 0.05f, .cutout = 1}}};
}

TEST(ImageAugment, KeepsSizeAndIsDeterministicPerSeed) {
  for (int channels : {1, 3}) {
    const Image src = testing::test_picture(40, 30, channels);
    for (const auto& [name, options] : each_augmentation()) {
      SCOPED_TRACE(name + " channels " + std::to_string(channels));
      std::set<std::string> outcomes;  // bytes as strings (GCC 12 warns falsely on vector<uint8_t> ordering)
      for (uint64_t seed = 0; seed < 8; ++seed) {
        Rng a(seed), b(seed);
        const Image x = image::augment_image(src, options, a), y = image::augment_image(src, options, b);
        ASSERT_EQ(x.width(), 40);
        ASSERT_EQ(x.height(), 30);
        ASSERT_EQ(x.channels(), channels);
        ASSERT_TRUE(same_pixels(x, y));
        outcomes.insert(std::string(x.data(), x.data() + x.bytes()));
      }
      // Random draws differ between seeds (gray images have no hue or saturation).
      const bool colour_only = name == "saturation" || name == "hue";
      if (!(colour_only && channels == 1)) {
        EXPECT_GE(outcomes.size(), 2u);
      }
    }
  }
}

TEST(ImageAugment, NothingEnabledCopies) {
  const Image src = testing::test_picture(17, 9);
  Rng rng(1);
  EXPECT_TRUE(same_pixels(image::augment_image(src, {}, rng), src));
}

TEST(ImageAugment, FlipsAreExactMirrors) {
  const Image src = testing::test_picture(17, 9);
  Image mirrored = src.clone();
  image::flip_horizontal(mirrored.view());
  int flipped = 0, kept = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Rng rng(seed);
    const Image out = image::augment_image(src, {.horizontal_flip = true}, rng);
    flipped += same_pixels(out, mirrored);
    kept += same_pixels(out, src);
  }
  EXPECT_EQ(flipped + kept, 40);  // always one or the other, never a blend
  EXPECT_GT(flipped, 8);
  EXPECT_GT(kept, 8);
}

TEST(ImageAugment, CutoutFillsSquareHoles) {
  Image src(40, 40, 3);
  std::fill_n(src.data(), src.bytes(), 255);
  Rng rng(4);
  const Image out = image::augment_image(src, {.fill_value = 0, .cutout = 1, .cutout_size = 0.25f}, rng);
  int64_t black = 0;
  for (std::size_t i = 0; i < out.bytes(); ++i) black += out.data()[i] == 0;
  EXPECT_GT(black, 0);
  EXPECT_LE(black, 10 * 10 * 3);  // a 10x10 hole, possibly clipped at the border
  EXPECT_EQ(black % 3, 0);
}

TEST(ImageAugment, RejectsOutOfRangeFactors) {
  EXPECT_NE(testing::error_of([] { image::augment({.rotation = 2}); }).find("rotation"), std::string::npos);
  EXPECT_NE(testing::error_of([] { image::augment({.hue = 0.7f}); }).find("hue"), std::string::npos);
  EXPECT_NE(testing::error_of([] { image::augment({.crop_area = 0}); }).find("crop_area"), std::string::npos);
}

TEST(ImageColor, NeutralFactorsAndKnownCases) {
  const Image src = testing::test_picture(16, 8);
  Image im = src.clone();
  image::adjust_brightness(im.view(), 1);
  image::adjust_contrast(im.view(), 1);
  image::adjust_saturation(im.view(), 1);
  image::adjust_hue(im.view(), 0);
  EXPECT_TRUE(same_pixels(im, src));

  image::adjust_brightness(im.view(), 0);  // black
  EXPECT_TRUE(std::all_of(im.data(), im.data() + im.bytes(), [](uint8_t v) { return v == 0; }));

  Image gray = src.clone();
  image::adjust_saturation(gray.view(), 0);  // R = G = B
  for (std::size_t i = 0; i < gray.bytes(); i += 3) {
    ASSERT_EQ(gray.data()[i], gray.data()[i + 1]);
    ASSERT_EQ(gray.data()[i], gray.data()[i + 2]);
  }

  Image flat = src.clone();
  image::adjust_contrast(flat.view(), 0);  // every byte the mean gray
  EXPECT_TRUE(std::all_of(flat.data(), flat.data() + flat.bytes(), [&](uint8_t v) { return v == flat.data()[0]; }));

  Image red(2, 1, 3);
  const uint8_t px[6] = {255, 0, 0, 10, 200, 10};
  std::copy(px, px + 6, red.data());
  image::adjust_hue(red.view(), 1.0f / 3);  // a third of a turn: red -> green, green -> blue
  EXPECT_EQ(std::vector<int>(red.data(), red.data() + 6), (std::vector<int>{0, 255, 0, 10, 10, 200}));
  image::adjust_hue(red.view(), -1.0f / 3);
  EXPECT_EQ(std::vector<int>(red.data(), red.data() + 6), (std::vector<int>{255, 0, 0, 10, 200, 10}));
}

// ---- pipeline maps ----

data::Example with_bytes(const std::string& file) {
  const auto bytes = testing::file_bytes(file);
  Tensor t(DType::u8, {static_cast<int64_t>(bytes.size())});
  std::copy(bytes.begin(), bytes.end(), t.data<uint8_t>().begin());
  data::Example e;
  e.set("image_bytes", std::move(t)).set_text("file", file);
  return e;
}

TEST(ImageMaps, DecodeFromBytesOrPathToAFixedSize) {
  Rng rng(0);
  const auto decode = image::decode_map("image_bytes", "image", {.width = 20, .height = 10});
  const data::Example e = decode(with_bytes(testing::image_fixture("rgb.jpg")), rng);
  EXPECT_FALSE(e.has("image_bytes"));  // the file is dropped once decoded
  EXPECT_EQ(e.tensor("image").shape(), (Shape{10, 20, 3}));
  EXPECT_EQ(e.text("file"), testing::image_fixture("rgb.jpg"));
  // The same DCT-scaled decode (1/2 here) and area resize as calling the codec directly.
  const image::Image direct =
      image::resize(image::read_image(testing::image_fixture("rgb.jpg"), {.min_width = 20, .min_height = 10}), 20, 10);
  EXPECT_TRUE(same_pixels(image::view_of(e.tensor("image")), direct));

  data::Example by_path;
  by_path.set_text("file", testing::image_fixture("gray.png"));
  const auto from_path = image::decode_map("file", "image", {.width = 8, .height = 8, .channels = 0,
                                                             .fit = image::Fit::cover});
  EXPECT_EQ(from_path(by_path, rng).tensor("image").shape(), (Shape{8, 8, 1}));
}

TEST(PipelineImages, BadFileNamesIt) {
  auto bytes = testing::file_bytes(testing::image_fixture("rgb.jpg"));
  bytes.resize(bytes.size() / 2);
  Tensor t(DType::u8, {static_cast<int64_t>(bytes.size())});
  std::copy(bytes.begin(), bytes.end(), t.data<uint8_t>().begin());
  data::Example cols;
  cols.set("image_bytes", Tensor(DType::u8, {1, static_cast<int64_t>(bytes.size())}));
  std::copy(bytes.begin(), bytes.end(), cols.tensor("image_bytes").data<uint8_t>().begin());
  cols.set_texts("file", {"images/Train_7.jpg"});
  const auto ds = data::Dataset::from_slices(cols).map(image::decode_map("image_bytes", "image", {.width = 8, .height = 8}));
  const std::string msg = testing::error_of([&] {
    for (data::Example& e : ds.epoch(0)) (void)e;
  });
  EXPECT_NE(msg.find("images/Train_7.jpg: truncated or corrupt JPEG (Premature end of JPEG file)"), std::string::npos)
      << msg;
}

TEST(PipelineImages, AugmentIsSeededPerElementWhateverTheThreads) {
  data::Example cols;
  Tensor images(DType::u8, {6, 12, 16, 3});
  const Image pic = testing::test_picture(16, 12);
  for (int i = 0; i < 6; ++i) std::copy_n(pic.data(), pic.bytes(), images.data<uint8_t>().data() + i * pic.bytes());
  cols.set("image", images);
  const auto ds = data::Dataset::from_slices(cols).map(image::augment({.horizontal_flip = true, .rotation = 0.2f}),
                                                       {.parallelism = 3, .seed = 11});
  auto collect = [&](int64_t epoch) {
    std::vector<std::vector<uint8_t>> out;
    for (data::Example& e : ds.epoch(epoch)) {
      EXPECT_EQ(e.tensor("image").shape(), (Shape{12, 16, 3}));
      const auto d = e.tensor("image").data<uint8_t>();
      out.emplace_back(d.begin(), d.end());
    }
    return out;
  };
  const auto first = collect(0);
  EXPECT_EQ(first, collect(0));  // same epoch, same draws, whatever the threads did
  EXPECT_NE(first, collect(1));  // the next epoch draws again
  EXPECT_NE(first[0], first[1]);  // each element its own draws
}

TEST(ImageMaps, ToFloatChwNormalisesPerChannel) {
  Image im(2, 1, 3);
  const uint8_t px[6] = {0, 255, 51, 255, 0, 102};
  std::copy(px, px + 6, im.data());
  data::Example e;
  e.set("image", image::to_tensor(im));
  Rng rng(0);
  const auto f = image::to_float_chw({0.5f, 0.5f, 0.0f}, {0.5f, 0.25f, 1.0f})(e, rng);
  const Tensor& t = f.tensor("image");
  ASSERT_EQ(t.shape(), (Shape{3, 1, 2}));
  const auto v = t.data<float>();
  const std::vector<float> want = {-1, 1, 2, -2, 0.2f, 0.4f};  // plane by plane
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(v[i], want[i], 1e-6) << i;
  EXPECT_NE(testing::error_of([&] { image::to_float_chw({0.1f, 0.2f}, {1, 1})(e, rng); }).find("2 means"),
            std::string::npos);
}

TEST(ImageMaps, NonImageFeatureIsAUserError) {
  data::Example e;
  e.set("image", Tensor(DType::f32, {3, 8, 8}));
  Rng rng(0);
  EXPECT_NE(testing::error_of([&] { image::augment({.horizontal_flip = true})(e, rng); }).find("not an image"),
            std::string::npos);
}

}  // namespace
}  // namespace convoy
