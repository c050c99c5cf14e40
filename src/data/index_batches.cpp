#include "convoy/data/index_batches.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "convoy/core/error.h"
#include "convoy/core/rng.h"

namespace convoy::data {
namespace {

class IndexBatchIterator final : public Iterator {
 public:
  IndexBatchIterator(std::vector<int32_t> positions, int64_t size, bool drop_remainder)
      : positions_(std::move(positions)), size_(size), drop_remainder_(drop_remainder) {}
  std::optional<Example> next() override {
    const int64_t left = static_cast<int64_t>(positions_.size()) - begin_;
    const int64_t count = std::min(size_, left);
    if (count <= 0 || (drop_remainder_ && count < size_)) return std::nullopt;
    Tensor index(DType::i32, {count});
    std::memcpy(index.raw(), positions_.data() + begin_, sizeof(int32_t) * static_cast<std::size_t>(count));
    begin_ += count;
    Example out;
    out.set("index", std::move(index));
    return out;
  }

 private:
  const std::vector<int32_t> positions_;
  const int64_t size_;
  const bool drop_remainder_;
  int64_t begin_ = 0;
};

}  // namespace

std::vector<int32_t> shuffled_positions(int64_t n, uint64_t seed, int64_t epoch) {
  require(n >= 0 && n <= INT32_MAX, "shuffled_positions: n must be in [0, 2^31), got " + std::to_string(n));
  std::vector<int32_t> buffer(static_cast<std::size_t>(n));
  std::iota(buffer.begin(), buffer.end(), 0);
  // shuffle.cpp's stream for (seed, epoch), and its draw: swap a random slot
  // of the remaining buffer to the back and hand the back out. In place, the
  // handed-out elements pile up from the end, so the order is the reverse.
  Rng rng(element_seed(seed, epoch, -1));
  for (std::size_t left = buffer.size(); left > 0; --left)
    std::swap(buffer[rng.below(left)], buffer[left - 1]);
  std::reverse(buffer.begin(), buffer.end());
  return buffer;
}

Dataset index_batches(PositionOrder positions, int64_t size, bool drop_remainder) {
  require(size >= 1, "index_batches: batch size must be at least 1, got " + std::to_string(size));
  require(static_cast<bool>(positions), "index_batches: the position order is empty; pass a callable");
  return Dataset([positions = std::move(positions), size, drop_remainder](int64_t epoch) {
    return std::make_unique<IndexBatchIterator>(positions(epoch), size, drop_remainder);
  });
}

}  // namespace convoy::data
