#include "convoy/image/augment.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

#include "convoy/core/error.h"
#include "convoy/image/color.h"

namespace convoy::image {
namespace {

void check(bool ok, const char* field, const char* range, float value) {
  require(ok, std::string("augment: ") + field + " must be in " + range + ", got " + std::to_string(value));
}

// Fills the part of the square centred at (cx, cy) that lies in the image.
void fill_hole(MutableImageView image, int cx, int cy, int side, uint8_t value) {
  const int x0 = std::max(0, cx - side / 2), x1 = std::min(image.width, cx - side / 2 + side);
  const int y0 = std::max(0, cy - side / 2), y1 = std::min(image.height, cy - side / 2 + side);
  if (x0 >= x1) return;
  for (int y = y0; y < y1; ++y)
    std::memset(image.row(y) + static_cast<std::size_t>(x0) * image.channels, value,
                static_cast<std::size_t>(x1 - x0) * image.channels);
}

}  // namespace

void validate(const AugmentOptions& o) {
  check(o.crop_area > 0 && o.crop_area <= 1, "crop_area", "(0, 1]", o.crop_area);
  check(o.rotation >= 0 && o.rotation <= 0.5f, "rotation", "[0, 0.5] (fractions of a full turn)", o.rotation);
  check(o.zoom >= 0 && o.zoom < 1, "zoom", "[0, 1)", o.zoom);
  check(o.translate >= 0 && o.translate <= 1, "translate", "[0, 1]", o.translate);
  check(o.brightness >= 0 && o.brightness <= 1, "brightness", "[0, 1]", o.brightness);
  check(o.contrast >= 0 && o.contrast <= 1, "contrast", "[0, 1]", o.contrast);
  check(o.saturation >= 0 && o.saturation <= 1, "saturation", "[0, 1]", o.saturation);
  check(o.hue >= 0 && o.hue <= 0.5f, "hue", "[0, 0.5]", o.hue);
  check(o.cutout >= 0, "cutout", "[0, inf)", static_cast<float>(o.cutout));
  check(o.cutout_size > 0 && o.cutout_size <= 1, "cutout_size", "(0, 1]", o.cutout_size);
}

void augment_into(ImageView src, MutableImageView dst, const AugmentOptions& o, Rng& rng) {
  require(src.data && dst.data && src.data != dst.data, "augment: needs a source and a separate target image");
  require(src.width == dst.width && src.height == dst.height && src.channels == dst.channels,
          "augment: the target must have the source's size and channels");
  const int W = src.width, H = src.height;
  const bool flip_x = o.horizontal_flip && rng.uniform01() < 0.5f;
  const bool flip_y = o.vertical_flip && rng.uniform01() < 0.5f;

  // Output -> source, composed so that the first step applied to the picture
  // is the outermost map: source = flip(crop(rotate(zoom(translate(out))))).
  Affine m;
  bool warped = false;
  if (o.crop_area < 1) {
    const double side = std::sqrt(static_cast<double>(rng.uniform(o.crop_area, 1.0f)));
    const double cw = W * side, ch = H * side;
    const double x = rng.uniform01() * (W - cw), y = rng.uniform01() * (H - ch);
    m = m.after(Affine::window(x, y, cw, ch, W, H));
    warped = true;
  }
  if (o.rotation > 0) {
    const double turn = rng.uniform(-o.rotation, o.rotation);
    m = m.after(Affine::rotation(turn * 2 * std::numbers::pi, W, H));
    warped = true;
  }
  if (o.zoom > 0) {
    const double z = rng.uniform(1 - o.zoom, 1 + o.zoom);
    m = m.after(Affine::zoom(z, z, W, H));
    warped = true;
  }
  if (o.translate > 0) {
    const double dx = rng.uniform(-o.translate, o.translate) * W, dy = rng.uniform(-o.translate, o.translate) * H;
    m = m.after(Affine::translation(dx, dy));
    warped = true;
  }
  if (warped) {
    // Flips fold into the map (exact at integer positions): one pass in all.
    const Affine flip{flip_x ? -1.0 : 1.0, 0, flip_x ? W - 1.0 : 0, 0, flip_y ? -1.0 : 1.0, flip_y ? H - 1.0 : 0};
    warp_affine(src, dst, flip.after(m), o.fill_mode, o.fill_value);
  } else {
    std::memcpy(dst.data, src.data, src.bytes());
    if (flip_x) flip_horizontal(dst);
    if (flip_y) flip_vertical(dst);
  }

  if (o.brightness > 0) adjust_brightness(dst, rng.uniform(std::max(0.0f, 1 - o.brightness), 1 + o.brightness));
  if (o.contrast > 0) adjust_contrast(dst, rng.uniform(std::max(0.0f, 1 - o.contrast), 1 + o.contrast));
  if (o.saturation > 0) adjust_saturation(dst, rng.uniform(std::max(0.0f, 1 - o.saturation), 1 + o.saturation));
  if (o.hue > 0) adjust_hue(dst, rng.uniform(-o.hue, o.hue));
  const int side = std::max(1, static_cast<int>(std::lround(o.cutout_size * std::min(W, H))));
  for (int i = 0; i < o.cutout; ++i) {
    const int cx = static_cast<int>(rng.below(static_cast<uint64_t>(W)));
    const int cy = static_cast<int>(rng.below(static_cast<uint64_t>(H)));
    fill_hole(dst, cx, cy, side, o.fill_value);
  }
}

Image augment_image(ImageView src, const AugmentOptions& o, Rng& rng) {
  Image out(src.width, src.height, src.channels);
  augment_into(src, out.view(), o, rng);
  return out;
}

}  // namespace convoy::image
