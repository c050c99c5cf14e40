#include "convoy/data/labeled_images.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "convoy/core/error.h"
#include "convoy/core/rng.h"

namespace convoy::data {

LabeledImages from_u8(const Tensor& images, const Tensor& labels, float mean, float std, const std::string& what) {
  require(images.shape().size() == 3 || images.shape().size() == 4,
          what + ": images must be [N, H, W] or [N, C, H, W], got " + to_string(images.shape()));
  require(labels.shape().size() == 1, what + ": labels must be [N], got " + to_string(labels.shape()));
  require(images.dim(0) == labels.dim(0), what + ": " + std::to_string(images.dim(0)) + " images but " +
                                              std::to_string(labels.dim(0)) + " labels; use matching files");
  require(std > 0, what + ": normalisation std must be positive");
  Shape shape = images.shape();
  if (shape.size() == 3) shape.insert(shape.begin() + 1, 1);
  LabeledImages out{Tensor(DType::f32, shape), Tensor(DType::i32, {labels.dim(0)})};
  auto src = images.data<uint8_t>();
  auto dst = out.images.data<float>();
  // One table for 256 values: the same float for the same pixel, fast.
  float table[256];
  for (int v = 0; v < 256; ++v) table[v] = (static_cast<float>(v) / 255.0f - mean) / std;
  for (std::size_t i = 0; i < src.size(); ++i) dst[i] = table[src[i]];
  std::copy(labels.data<uint8_t>().begin(), labels.data<uint8_t>().end(), out.labels.data<int32_t>().begin());
  return out;
}

LabeledImages take(const LabeledImages& d, int64_t n) {
  n = std::min(n, d.size());
  Shape shape = d.images.shape();
  shape[0] = n;
  LabeledImages out{Tensor(DType::f32, shape), Tensor(DType::i32, {n})};
  std::memcpy(out.images.raw(), d.images.raw(), out.images.nbytes());
  std::memcpy(out.labels.raw(), d.labels.raw(), out.labels.nbytes());
  return out;
}

EpochBatches::EpochBatches(const LabeledImages& data, int64_t batch_size, bool shuffle, bool drop_remainder,
                           uint64_t seed, int64_t epoch)
    : data_(data), batch_size_(batch_size), order_(data.size()) {
  require(batch_size >= 1, "batch size must be at least 1");
  std::iota(order_.begin(), order_.end(), 0);
  if (shuffle) {
    Rng rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) + 1);
    convoy::shuffle(order_, rng);
  }
  const int64_t n = data.size();
  num_batches_ = drop_remainder ? n / batch_size : (n + batch_size - 1) / batch_size;
}

int64_t EpochBatches::gather(int64_t b, float* x, int32_t* y) const {
  const int64_t begin = b * batch_size_;
  const int64_t count = std::min(batch_size_, data_.size() - begin);
  const int64_t example = numel(data_.example_shape());
  const float* images = data_.images.data<float>().data();
  const int32_t* labels = data_.labels.data<int32_t>().data();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t src = order_[begin + i];
    std::memcpy(x + i * example, images + src * example, sizeof(float) * example);
    y[i] = labels[src];
  }
  return count;
}

}  // namespace convoy::data
