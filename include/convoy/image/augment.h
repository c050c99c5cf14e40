#pragma once
// Augmentation on u8 HWC images: seeded, deterministic, and the output is
// always the input's size (the fixed shapes a batch and an accelerator need).
#include <cstdint>
#include <string>

#include "convoy/core/rng.h"
#include "convoy/image/geometry.h"

namespace convoy::image {

// Every field off by default. Factors follow Keras' preprocessing layers
// (geometry) and torchvision's ColorJitter (colour).
struct AugmentOptions {
  bool horizontal_flip = false;  // each with probability 1/2 (Keras RandomFlip)
  bool vertical_flip = false;
  // Random crop, stretched back to the full size: a window of uniform random
  // area in [crop_area, 1] of the image, same aspect ratio, uniform position.
  float crop_area = 1;  // 1: off
  float rotation = 0;   // angle uniform in [-rotation, rotation] x 2 pi (Keras RandomRotation factor)
  float zoom = 0;       // scale uniform in [1 - zoom, 1 + zoom]; > 1 zooms out (Keras RandomZoom)
  float translate = 0;  // shift uniform in [-translate, translate] x width (and x height)
  FillMode fill_mode = FillMode::reflect;  // Keras' default
  uint8_t fill_value = 0;                  // for FillMode::constant and cutout
  float brightness = 0;  // factor uniform in [1 - b, 1 + b]
  float contrast = 0;    // factor uniform in [1 - c, 1 + c]
  float saturation = 0;  // factor uniform in [1 - s, 1 + s]
  float hue = 0;         // shift uniform in [-hue, hue] of a circle, hue <= 0.5
  int cutout = 0;        // square holes filled with fill_value (DeVries & Taylor's Cutout)
  float cutout_size = 0.25f;  // hole side as a fraction of the shorter image side
};

// Throws UserError naming the first field out of range.
void validate(const AugmentOptions& options);

// dst = src augmented with draws from `rng`; dst must be src's size and must
// not be src. The draws, in this order and only for enabled fields: the two
// flips, the crop (area, x, y), rotation, zoom, translation (x, y),
// brightness, contrast, saturation, hue, then each hole (x, y). The geometric
// steps (flips, crop, rotation, zoom, translation, applied in that order)
// become one affine map and one bilinear pass; flips alone are exact copies.
void augment_into(ImageView src, MutableImageView dst, const AugmentOptions& options, Rng& rng);
Image augment_image(ImageView src, const AugmentOptions& options, Rng& rng);

}  // namespace convoy::image
