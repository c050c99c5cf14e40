#pragma once
// Ready-made map functions for Dataset::map, and the stratified split.
#include <cstdint>
#include <string>

#include "convoy/data/dataset.h"

namespace convoy::data {

// f32 (x - mean) / std of a feature. u8 pixels are first scaled to [0, 1]
// (x / 255), giving exactly the floats of from_u8; f32 is taken as is.
MapFn normalize(std::string feature, float mean, float std);

// Class ids (i32 or u8, a scalar or a vector) become an f32 [depth] vector
// with a 1 at each id: one-hot for a scalar, multi-hot for a vector. Throws
// UserError for an id outside [0, depth).
MapFn one_hot(std::string feature, int64_t depth);

// Replaces an example's `index` by row `index` of `data`: `image` f32
// [C, H, W] and `label` i32 [] (with Dataset::range, a shuffle of positions).
MapFn rows_of(const LabeledImages& data);
// The same rows, each batch's copied by the calling thread's OpenMP threads
// (num_threads()): for input gathered on the training thread between steps,
// where a prefetch thread would have no core of its own (train::in_memory).
// A batch's image tensor is reused for a later batch once no Tensor holds it
// any more (so a raw pointer into it is good only while its Example lives).
MapFn rows_of_on_threads(const LabeledImages& data);

// Augmentation: mirrors an image (CHW or HW; the last axis is the width) with
// probability 1/2, drawn from the element's generator. Keeps the size.
MapFn random_flip(std::string feature);

// Splits `data` by the integer scalar `label` feature so that each class
// gives round(validation_fraction x its count) examples to validation, chosen
// at random by `seed`; the rest are train. Reads `data` once (epoch 0) to
// learn the labels; both halves keep `data`'s order. Split a dataset whose
// order does not change between epochs (split before shuffle).
struct TrainValidation {
  Dataset train, validation;
};
TrainValidation stratified_split(const Dataset& data, double validation_fraction, uint64_t seed,
                                 const std::string& label = "label");

}  // namespace convoy::data
