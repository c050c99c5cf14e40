#pragma once
// Image steps for the input pipeline (data::Dataset::map). Images travel in
// examples as u8 [H, W, C] tensors; the model takes f32 [C, H, W].
//
//   auto train = source                                         // "file" (a path) or "image_bytes"
//       .map(image::decode_map("file", "image", {.width = 224, .height = 224}),
//            {.parallelism = data::kAutotune})
//       .cache()                                                // decoded once
//       .map(image::augment({.horizontal_flip = true, .rotation = 0.1f}),
//            {.parallelism = data::kAutotune, .seed = 7})       // re-drawn every epoch
//       .map(image::to_float_chw({0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f}))
//       .shuffle(1000, 1).batch(32).prefetch(2);
#include <string>
#include <vector>

#include "convoy/data/dataset.h"
#include "convoy/image/augment.h"
#include "convoy/image/codec.h"
#include "convoy/image/geometry.h"

namespace convoy::image {

// How a decoded image is brought to width x height.
enum class Fit {
  stretch,  // resize to exactly width x height, aspect ratio not kept (tf.image.resize, the seed article)
  cover,    // keep the aspect ratio, fill width x height, cut the overflow evenly (resize + center crop)
};

struct DecodeMapOptions {
  int width = 0, height = 0;  // 0 and 0: keep each image's own size (then images differ and cannot batch)
  int channels = 3;           // 0 (the file's), 1 or 3
  ResizeMethod method = ResizeMethod::area;
  Fit fit = Fit::stretch;
  uint64_t max_bytes = kDefaultMaxImageBytes;  // of one encoded image (codec.h)
};

// Decodes feature `from` into `to` (u8 [H, W, C]). `from` is either a u8
// tensor holding the encoded file (a TFRecord's image/encoded) or a text
// feature holding a path to read. JPEGs shrink in the DCT domain as far as
// the target size allows (codec.h), then are resized. A tensor `from` is
// dropped from the example (so cache() keeps pixels, not files). Errors name
// the path, or the example's "file"/"id" text when the bytes came inline.
data::MapFn decode_map(std::string from, std::string to, DecodeMapOptions options = {});

// Resizes an image feature to width x height.
data::MapFn resize_map(std::string feature, int width, int height, ResizeMethod method = ResizeMethod::area);

// Augments an image feature with a generator drawn per element (augment.h):
// the same (map seed, epoch, position) gives the same image.
data::MapFn augment(AugmentOptions options, std::string feature = "image");

// u8 [H, W, C] -> f32 [C, H, W] holding (v / 255 - mean[c]) / std[c]. mean
// and std have one value per channel, or one for all.
data::MapFn to_float_chw(std::vector<float> mean = {0.0f}, std::vector<float> std = {1.0f},
                         std::string feature = "image");

}  // namespace convoy::image
