#include "convoy/data/transforms.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#include "core/tsan_openmp.h"

namespace convoy::data {
namespace {

// Integer class ids of a feature, as int64 whatever the dtype.
std::vector<int64_t> class_ids(const Tensor& t, const std::string& feature) {
  switch (t.dtype()) {
    case DType::i32: return {t.data<int32_t>().begin(), t.data<int32_t>().end()};
    case DType::u8: return {t.data<uint8_t>().begin(), t.data<uint8_t>().end()};
    case DType::f32: break;
  }
  throw UserError("feature '" + feature + "' holds f32 values, not class ids; labels must be i32 or u8");
}

}  // namespace

MapFn normalize(std::string feature, float mean, float std) {
  require(std > 0, "normalize: std must be positive, got " + std::to_string(std));
  return [feature = std::move(feature), mean, std](Example e, Rng&) {
    const Tensor& in = e.tensor(feature);
    Tensor out(DType::f32, in.shape());
    auto dst = out.data<float>();
    if (in.dtype() == DType::u8) {
      // The same table as from_u8: identical floats whichever path loads the data.
      float table[256];
      for (int v = 0; v < 256; ++v) table[v] = (static_cast<float>(v) / 255.0f - mean) / std;
      auto src = in.data<uint8_t>();
      for (std::size_t i = 0; i < src.size(); ++i) dst[i] = table[src[i]];
    } else {
      auto src = in.data<float>();
      for (std::size_t i = 0; i < src.size(); ++i) dst[i] = (src[i] - mean) / std;
    }
    e.set(feature, std::move(out));
    return e;
  };
}

MapFn one_hot(std::string feature, int64_t depth) {
  require(depth >= 1, "one_hot: depth must be at least 1, got " + std::to_string(depth));
  return [feature = std::move(feature), depth](Example e, Rng&) {
    Tensor out(DType::f32, {depth});
    for (int64_t id : class_ids(e.tensor(feature), feature)) {
      if (id < 0 || id >= depth)  // not require(): its message would be built for every example
        throw UserError("one_hot: feature '" + feature + "' holds class " + std::to_string(id) + ", outside [0, " +
                        std::to_string(depth) + "); pass the right depth");
      out.data<float>()[id] = 1.0f;
    }
    e.set(feature, std::move(out));
    return e;
  };
}

namespace {

// The image tensor of the batch gathered last, kept to gather the next one
// into once its consumer has dropped it: no allocation, no zero-fill and no
// page faults per batch.
struct Recycled {
  std::mutex mu;
  Tensor image;
};

// An f32 tensor of `shape` whose contents are about to be overwritten:
// recycled's when no one else holds it, otherwise a new one (kept for next time).
Tensor batch_tensor(const Shape& shape, Recycled* recycled) {
  if (!recycled) return Tensor(DType::f32, shape);
  std::lock_guard lock(recycled->mu);
  if (recycled->image.empty() || recycled->image.storage_shared() || recycled->image.shape() != shape)
    recycled->image = Tensor(DType::f32, shape);
  return recycled->image;
}

// Out of line and only on failure: `require(ok, "..." + std::to_string(row)
// ...)` builds its message before it tests `ok`, and once per row that was
// ~25 us of a 128-row batch's ~60 us gather (docs/benchmarks.md, 2026-12-02
// 18:00 UTC), in series with the steps when the training threads gather.
[[noreturn]] void throw_row_outside(int64_t row, int64_t n) {
  throw UserError("rows_of: index " + std::to_string(row) + " is outside the " + std::to_string(n) +
                  " examples; index with Dataset::range(size)");
}

// Replaces e's `index` (a scalar or a batch [B]) by those rows of images and
// labels. threads > 1: the rows are copied by that many OpenMP threads of the
// calling thread (the indices are checked first, on the calling thread, so a
// bad one throws from there).
Example gather_rows(const Tensor& images, const Tensor& labels, const Example& e, int threads, Recycled* recycled) {
  const int64_t n = labels.dim(0);
  const Tensor& index = e.tensor("index");
  Shape image_shape = index.shape();
  image_shape.insert(image_shape.end(), images.shape().begin() + 1, images.shape().end());
  Tensor image = batch_tensor(image_shape, recycled);
  Tensor label(DType::i32, index.shape());
  const int64_t size = numel(Shape(images.shape().begin() + 1, images.shape().end()));
  const auto rows = index.data<int32_t>();
  const float* from = images.data<float>().data();
  float* to = image.data<float>().data();
  const int32_t* from_labels = labels.data<int32_t>().data();
  int32_t* to_labels = label.data<int32_t>().data();
  const auto count = static_cast<int64_t>(rows.size());
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = rows[static_cast<std::size_t>(i)];
    if (row < 0 || row >= n) throw_row_outside(row, n);
    to_labels[i] = from_labels[row];
  }
  // The rows lie at random in a dataset larger than the caches: asking for
  // the next row while this one is copied keeps two in flight (a Fashion-MNIST
  // batch gathered in ~40% less time on the Xeon of docs/benchmarks.md).
  constexpr int64_t kLine = 64 / sizeof(float);
  threads = openmp_team_for_tsan(threads);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && count > 1)
  for (int64_t i = 0; i < count; ++i) {
    if (i + 1 < count) {
      const float* ahead = from + rows[static_cast<std::size_t>(i + 1)] * size;
      for (int64_t k = 0; k < size; k += kLine) __builtin_prefetch(ahead + k);
    }
    std::copy_n(from + rows[static_cast<std::size_t>(i)] * size, size, to + i * size);
  }
  Example out;
  out.set("image", std::move(image)).set("label", std::move(label));
  return out;
}

}  // namespace

MapFn rows_of(const LabeledImages& data) {
  // Tensors share storage: the capture holds the data, it does not copy it.
  // The index may be a scalar or a batch of indices [B] (batching positions
  // first gathers a whole batch with one allocation instead of B).
  return [images = data.images, labels = data.labels](Example e, Rng&) {
    return gather_rows(images, labels, e, 1, nullptr);
  };
}

MapFn rows_of_on_threads(const LabeledImages& data) {
  return [images = data.images, labels = data.labels, recycled = std::make_shared<Recycled>()](Example e, Rng&) {
    return gather_rows(images, labels, e, omp_in_parallel() ? 1 : num_threads(), recycled.get());
  };
}

MapFn random_flip(std::string feature) {
  return [feature = std::move(feature)](Example e, Rng& rng) {
    if (rng.uniform01() < 0.5f) return e;
    Tensor& t = e.tensor(feature);
    require(t.shape().size() >= 2, "random_flip: feature '" + feature + "' is " + to_string(t.shape()) +
                                       "; it needs an image of rank 2 (HW) or more (CHW)");
    const std::size_t width = static_cast<std::size_t>(t.shape().back());
    const std::size_t row_bytes = width * dtype_size(t.dtype());
    const std::size_t elem = dtype_size(t.dtype());
    auto* data = static_cast<std::byte*>(t.raw());
    for (std::size_t r = 0; r < t.nbytes() / row_bytes; ++r) {
      std::byte* row = data + r * row_bytes;
      for (std::size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap_ranges(row + a * elem, row + (a + 1) * elem, row + b * elem);
    }
    return e;
  };
}

TrainValidation stratified_split(const Dataset& data, double validation_fraction, uint64_t seed,
                                 const std::string& label) {
  require(validation_fraction >= 0 && validation_fraction <= 1,
          "stratified_split: validation_fraction must be in [0, 1], got " + std::to_string(validation_fraction));
  std::map<int64_t, std::vector<int64_t>> positions_by_class;  // ordered: the same draws on every platform
  int64_t n = 0;
  for (auto it = data.iterate(0); auto e = it->next(); ++n) {
    const auto ids = class_ids(e->tensor(label), label);
    require(ids.size() == 1 && e->tensor(label).shape().empty(),
            "stratified_split: feature '" + label + "' of example " + std::to_string(n) +
                " is not a scalar class id; split before one-hot encoding");
    positions_by_class[ids[0]].push_back(n);
  }
  auto validation = std::make_shared<std::vector<bool>>(n, false);
  Rng rng(element_seed(seed, 0, -3));
  for (auto& [cls, positions] : positions_by_class) {
    shuffle(positions, rng);
    const auto take = static_cast<std::size_t>(std::llround(validation_fraction * positions.size()));
    for (std::size_t i = 0; i < take; ++i) (*validation)[positions[i]] = true;
  }
  auto in_validation = [validation](int64_t p) { return p < static_cast<int64_t>(validation->size()) && (*validation)[p]; };
  return {data.filter_positions([in_validation](int64_t p) { return !in_validation(p); }),
          data.filter_positions(in_validation)};
}

}  // namespace convoy::data
