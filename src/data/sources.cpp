// Sources: in-memory columns sliced into examples, and the files that fill them.
#include <cstdint>
#include <cstring>
#include <memory>

#include "convoy/core/error.h"
#include "convoy/data/dataset.h"
#include "convoy/data/fashion_mnist.h"
#include "convoy/data/idx.h"

namespace convoy::data {
namespace {

// Hands out row `i` of every column; each example gets its own copy.
class SliceIterator final : public Iterator {
 public:
  SliceIterator(std::shared_ptr<const Example> columns, int64_t rows) : columns_(std::move(columns)), rows_(rows) {}
  std::optional<Example> next() override {
    if (row_ == rows_) return std::nullopt;
    Example out;
    for (const auto& [name, column] : columns_->tensors()) {
      Tensor t(column.dtype(), Shape(column.shape().begin() + 1, column.shape().end()));
      const std::size_t bytes = t.nbytes();
      std::memcpy(t.raw(), static_cast<const std::byte*>(column.raw()) + row_ * bytes, bytes);
      out.set(name, std::move(t));
    }
    for (const auto& [name, values] : columns_->text_features()) out.set_text(name, values[row_]);
    ++row_;
    return out;
  }

 private:
  std::shared_ptr<const Example> columns_;
  int64_t rows_, row_ = 0;
};

int64_t count_rows(const Example& columns) {
  int64_t rows = -1;
  auto agree = [&](const std::string& name, int64_t n) {
    if (rows < 0) rows = n;
    require(rows == n, "from_slices: feature '" + name + "' has " + std::to_string(n) + " rows but the others have " +
                           std::to_string(rows) + "; give every feature the same first dimension");
  };
  for (const auto& [name, t] : columns.tensors()) {
    require(!t.empty() && !t.shape().empty(),
            "from_slices: feature '" + name + "' is a scalar; slicing needs a first (example) dimension");
    agree(name, t.dim(0));
  }
  for (const auto& [name, values] : columns.text_features()) agree(name, static_cast<int64_t>(values.size()));
  require(rows >= 0, "from_slices: no features given; add at least one tensor or text column");
  return rows;
}

}  // namespace

Dataset::Dataset(Opener open) : open_(std::move(open)) {}

Dataset Dataset::from_slices(Example columns) {
  const int64_t rows = count_rows(columns);
  auto shared = std::make_shared<const Example>(std::move(columns));
  return Dataset([shared, rows](int64_t) { return std::make_unique<SliceIterator>(shared, rows); });
}

Dataset Dataset::range(int64_t n) {
  require(n >= 0 && n <= INT32_MAX, "range: n must be in [0, 2^31), got " + std::to_string(n));
  Tensor index(DType::i32, {n});
  for (int64_t i = 0; i < n; ++i) index.data<int32_t>()[i] = static_cast<int32_t>(i);
  return from_slices(Example().set("index", std::move(index)));
}

Dataset Dataset::from_labeled_images(const LabeledImages& data) {
  return from_slices(Example().set("image", data.images).set("label", data.labels));
}

Dataset Dataset::from_idx(const std::string& images_path, const std::string& labels_path) {
  const Tensor images = read_idx_u8(images_path);
  const Tensor labels = read_idx_u8(labels_path);
  const Shape& s = images.shape();
  require(s.size() == 3 || s.size() == 4,
          images_path + ": expected images [N, H, W] or [N, C, H, W], got " + to_string(s));
  require(labels.shape().size() == 1, labels_path + ": expected labels [N], got " + to_string(labels.shape()));
  require(s[0] == labels.dim(0), images_path + " holds " + std::to_string(s[0]) + " images but " + labels_path +
                                     " holds " + std::to_string(labels.dim(0)) + " labels; use matching files");
  // [N, H, W] gains a channel axis so images are CHW like everything else.
  Tensor chw(DType::u8, s.size() == 3 ? Shape{s[0], 1, s[1], s[2]} : s);
  std::memcpy(chw.raw(), images.raw(), images.nbytes());
  Tensor ids(DType::i32, {labels.dim(0)});
  std::copy(labels.data<uint8_t>().begin(), labels.data<uint8_t>().end(), ids.data<int32_t>().begin());
  return from_slices(Example().set("image", std::move(chw)).set("label", std::move(ids)));
}

Dataset Dataset::fashion_mnist(const std::string& dir, const std::string& split) {
  const IdxFiles files = fashion_mnist_files(dir, split);
  return from_idx(files.images, files.labels);
}

uint64_t element_seed(uint64_t seed, int64_t epoch, int64_t position) {
  // Three SplitMix64 rounds, one per input, so nearby (epoch, position) pairs
  // give unrelated streams.
  Rng a(seed);
  Rng b(a.next_u64() ^ static_cast<uint64_t>(epoch));
  Rng c(b.next_u64() ^ static_cast<uint64_t>(position));
  return c.next_u64();
}

}  // namespace convoy::data
