// batch: stacks examples into one contiguous tensor per feature, ready to hand
// to a training step as is (x [B, C, H, W] f32, y [B] i32).
#include <cstring>

#include "convoy/core/error.h"
#include "convoy/data/dataset.h"

namespace convoy::data {
namespace {

Example stack(std::vector<Example>& rows) {
  const Example& first = rows.front();
  const int64_t n = static_cast<int64_t>(rows.size());
  Example out;
  for (const auto& [name, t] : first.tensors()) {
    Shape shape = t.shape();
    shape.insert(shape.begin(), n);
    Tensor stacked(t.dtype(), std::move(shape));
    auto* dst = static_cast<std::byte*>(stacked.raw());
    const std::size_t bytes = t.nbytes();
    for (int64_t i = 0; i < n; ++i) {
      const Tensor& row = rows[i].tensor(name);
      if (row.dtype() != t.dtype() || row.shape() != t.shape())
        throw UserError("batch: feature '" + name + "' is " + dtype_name(row.dtype()) + " " + to_string(row.shape()) +
                        " in one example but " + dtype_name(t.dtype()) + " " + to_string(t.shape()) +
                        " in another; make every example the same size (resize or pad in a map) before batch");
      std::memcpy(dst + i * bytes, row.raw(), bytes);
    }
    out.set(name, std::move(stacked));
  }
  for (const auto& [name, values] : first.text_features()) {
    std::vector<std::string> column;
    column.reserve(n);
    for (const Example& row : rows)
      for (const std::string& v : row.texts(name)) column.push_back(v);
    out.set_texts(name, std::move(column));
  }
  return out;
}

class BatchIterator final : public Iterator {
 public:
  BatchIterator(std::unique_ptr<Iterator> input, int64_t size, bool drop_remainder)
      : input_(std::move(input)), size_(size), drop_remainder_(drop_remainder) {
    rows_.reserve(size);
  }
  std::optional<Example> next() override {
    rows_.clear();  // keeps its capacity: one vector for every batch
    while (static_cast<int64_t>(rows_.size()) < size_) {
      auto e = input_->next();
      if (!e) break;
      rows_.push_back(std::move(*e));
    }
    if (rows_.empty() || (drop_remainder_ && static_cast<int64_t>(rows_.size()) < size_)) return std::nullopt;
    return stack(rows_);
  }

 private:
  std::unique_ptr<Iterator> input_;
  int64_t size_;
  bool drop_remainder_;
  std::vector<Example> rows_;
};

}  // namespace

Dataset Dataset::batch(int64_t size, bool drop_remainder) const {
  require(size >= 1, "batch: batch size must be at least 1, got " + std::to_string(size));
  return Dataset([input = *this, size, drop_remainder](int64_t epoch) {
    return std::make_unique<BatchIterator>(input.iterate(epoch), size, drop_remainder);
  });
}

}  // namespace convoy::data
