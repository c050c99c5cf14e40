#pragma once
// Colour adjustments, in place, with torchvision's ColorJitter semantics
// (factor 1 leaves the image unchanged). Gray images take brightness and
// contrast; saturation and hue need 3 channels and leave gray ones alone.
#include "convoy/image/image.h"

namespace convoy::image {

// v * factor (a blend with black).
void adjust_brightness(MutableImageView image, float factor);
// mean + factor * (v - mean), mean = the image's average gray (0.299 R +
// 0.587 G + 0.114 B): a blend with a flat gray image.
void adjust_contrast(MutableImageView image, float factor);
// gray + factor * (v - gray) per pixel: 0 gives grayscale, > 1 more colour.
void adjust_saturation(MutableImageView image, float factor);
// Turns every pixel's hue by `shift` of a full circle (HSV), shift in [-0.5, 0.5].
void adjust_hue(MutableImageView image, float shift);

}  // namespace convoy::image
