// shuffle: tf.data's buffered shuffle. The buffer is filled from the input,
// a random slot is handed out and the next input takes its place, so output k
// always comes from the first buffer + k inputs: a small buffer shuffles
// locally, one as large as the dataset gives a uniform permutation.
#include "convoy/core/error.h"
#include "convoy/data/dataset.h"

namespace convoy::data {
namespace {

class ShuffleIterator final : public Iterator {
 public:
  ShuffleIterator(std::unique_ptr<Iterator> input, int64_t buffer, uint64_t seed)
      : input_(std::move(input)), capacity_(buffer), rng_(seed) {}
  std::optional<Example> next() override {
    while (!input_done_ && static_cast<int64_t>(buffer_.size()) < capacity_) {
      auto e = input_->next();
      if (!e) {
        input_done_ = true;
        break;
      }
      buffer_.push_back(std::move(*e));
    }
    if (buffer_.empty()) return std::nullopt;
    std::swap(buffer_[rng_.below(buffer_.size())], buffer_.back());
    Example out = std::move(buffer_.back());
    buffer_.pop_back();
    return out;
  }

 private:
  std::unique_ptr<Iterator> input_;
  int64_t capacity_;
  Rng rng_;
  std::vector<Example> buffer_;
  bool input_done_ = false;
};

}  // namespace

Dataset Dataset::shuffle(int64_t buffer, uint64_t seed, bool reshuffle_each_epoch) const {
  require(buffer >= 1, "shuffle: buffer size must be at least 1, got " + std::to_string(buffer));
  return Dataset([input = *this, buffer, seed, reshuffle_each_epoch](int64_t epoch) {
    // Position -1 keeps this stream apart from the per-element map seeds.
    const uint64_t order_seed = element_seed(seed, reshuffle_each_epoch ? epoch : 0, -1);
    return std::make_unique<ShuffleIterator>(input.iterate(epoch), buffer, order_seed);
  });
}

}  // namespace convoy::data
