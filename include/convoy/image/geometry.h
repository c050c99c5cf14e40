#pragma once
// Geometry on u8 HWC images: resize, crops, flips and affine warps (rotation,
// zoom, translation). Every function writes a fixed, caller-chosen size.
//
// Conventions, the same as PIL, torchvision and tf.image:
// - Pixel i covers [i, i + 1) and its centre is i + 0.5 ("half-pixel centres").
// - bilinear: output x samples the input at (x + 0.5) * in / out - 0.5 from
//   its two nearest pixels, clamped at the borders (tf.image.resize bilinear,
//   antialias=False; torch interpolate align_corners=False). Aliases when
//   shrinking by more than 2x: use area there.
// - area: each output pixel is the exact average of the input area it covers,
//   partly covered pixels weighted by their share (tf.image.resize "area",
//   OpenCV INTER_AREA; PIL's BOX for whole-number ratios). The antialiased
//   choice for shrinking.
// Results are rounded to the nearest byte.
#include <cstdint>

#include "convoy/core/rng.h"
#include "convoy/image/image.h"

namespace convoy::image {

enum class ResizeMethod { bilinear, area };

// Resizes src into dst (dst's size is the target; channels must match).
void resize_into(ImageView src, MutableImageView dst, ResizeMethod method = ResizeMethod::area);
Image resize(ImageView src, int width, int height, ResizeMethod method = ResizeMethod::area);

// The width x height window whose top-left pixel is (x, y); it must lie inside src.
Image crop(ImageView src, int x, int y, int width, int height);
// The centred window (odd leftovers go to the right/bottom, as torchvision).
Image center_crop(ImageView src, int width, int height);
// A window at a uniform random position (Keras RandomCrop); src must be at
// least width x height.
Image random_crop(ImageView src, int width, int height, Rng& rng);
// Scales src so that it covers width x height with its aspect ratio kept (the
// shorter side fits), then takes the centred window: "resize 256, center crop
// 224" in one step, without distortion.
Image resize_cover(ImageView src, int width, int height, ResizeMethod method = ResizeMethod::area);

// In place.
void flip_horizontal(MutableImageView image);
void flip_vertical(MutableImageView image);

// How pixels outside the source are made up (Keras/tf.image fill modes;
// for a row a b c d):
//   reflect  d c b a | a b c d | d c b a   (the edge pixel repeats)
//   wrap     a b c d | a b c d | a b c d
//   nearest  a a a a | a b c d | d d d d
//   constant k k k k | a b c d | k k k k   (k = fill_value)
enum class FillMode { constant, reflect, wrap, nearest };

// Maps an output pixel's integer position (x, y) to the source position it
// samples: (a x + b y + c, d x + e y + f), in pixel-index coordinates (pixel
// i at i). The Keras/TF ImageProjectiveTransform convention.
struct Affine {
  double a = 1, b = 0, c = 0, d = 0, e = 1, f = 0;
  // (*this)(then(p)): apply `then` first.
  Affine after(const Affine& then) const;
  static Affine identity() { return {}; }
  // Rotates the picture counter-clockwise by `radians` about the centre of a
  // width x height image (Keras RandomRotation).
  static Affine rotation(double radians, int width, int height);
  // zoom > 1 shows more of the source (zooms out), about the centre (Keras RandomZoom).
  static Affine zoom(double zoom_x, double zoom_y, int width, int height);
  // Moves the picture right by dx and down by dy pixels (Keras RandomTranslation).
  static Affine translation(double dx, double dy);
  // The source window (x, y, w, h) stretched over a dst_width x dst_height
  // output with half-pixel centres, as resize does.
  static Affine window(double x, double y, double w, double h, int dst_width, int dst_height);
  bool is_identity() const { return a == 1 && b == 0 && c == 0 && d == 0 && e == 1 && f == 0; }
};

// dst(x, y) = src sampled bilinearly at out_to_src(x, y); each of the four
// neighbours outside src comes from `fill`. Exact at integer positions, so
// the identity copies and a 180 degree rotation equals both flips.
void warp_affine(ImageView src, MutableImageView dst, const Affine& out_to_src, FillMode fill = FillMode::reflect,
                 uint8_t fill_value = 0);

}  // namespace convoy::image
