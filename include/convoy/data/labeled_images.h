#pragma once
// An in-memory image classification dataset and the per-epoch batches the
// trainer draws from it.
#include <cstdint>
#include <vector>

#include "convoy/core/tensor.h"

namespace convoy::data {

struct LabeledImages {
  Tensor images;  // f32 [N, C, H, W]
  Tensor labels;  // i32 [N]
  int64_t size() const { return labels.empty() ? 0 : labels.dim(0); }
  Shape example_shape() const { return {images.shape().begin() + 1, images.shape().end()}; }
};

// Builds a dataset from uint8 images [N, H, W] (or [N, C, H, W]) and labels
// [N]: pixels scaled to [0, 1] then (x - mean) / std. Throws UserError when the
// counts differ.
LabeledImages from_u8(const Tensor& images, const Tensor& labels, float mean, float std, const std::string& what);

// The first n examples (all when n >= size).
LabeledImages take(const LabeledImages& d, int64_t n);

// One epoch's batches: a seeded permutation (a fresh one per epoch, the same
// for the same seed and epoch) cut into batches of a fixed size.
class EpochBatches {
 public:
  EpochBatches(const LabeledImages& data, int64_t batch_size, bool shuffle, bool drop_remainder, uint64_t seed,
               int64_t epoch);
  int64_t size() const { return num_batches_; }
  // Copies batch b into x [batch, example...] and y [batch]; returns how many
  // examples it holds (< batch only for a kept remainder).
  int64_t gather(int64_t b, float* x, int32_t* y) const;

 private:
  const LabeledImages& data_;
  int64_t batch_size_, num_batches_;
  std::vector<int64_t> order_;
};

}  // namespace convoy::data
