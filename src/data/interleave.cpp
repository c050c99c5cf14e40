// interleave: opens a dataset per input example (a file, a shard) and cycles
// over up to cycle_length of them, block_length examples from each in turn;
// an exhausted one is replaced by the next input's on its next turn.
#include "convoy/core/error.h"
#include "convoy/data/dataset.h"

namespace convoy::data {
namespace {

using Open = std::function<Dataset(const Example&)>;

class InterleaveIterator final : public Iterator {
 public:
  InterleaveIterator(std::unique_ptr<Iterator> input, std::shared_ptr<const Open> open, int64_t cycle_length,
                     int64_t block_length, int64_t epoch)
      : input_(std::move(input)), open_(std::move(open)), cycle_(cycle_length), block_length_(block_length),
        epoch_(epoch) {}

  std::optional<Example> next() override {
    for (;;) {
      auto& slot = cycle_[turn_];
      if (!slot && !input_done_) {
        if (auto e = input_->next())
          slot = (*open_)(*e).iterate(epoch_);
        else
          input_done_ = true;
      }
      if (slot) {
        if (auto e = slot->next()) {
          if (++taken_ == block_length_) advance();
          return e;
        }
        slot.reset();
      } else if (input_done_ && all_closed()) {
        return std::nullopt;
      }
      advance();
    }
  }

 private:
  void advance() {
    turn_ = (turn_ + 1) % cycle_.size();
    taken_ = 0;
  }
  bool all_closed() const {
    for (const auto& s : cycle_)
      if (s) return false;
    return true;
  }

  std::unique_ptr<Iterator> input_;
  std::shared_ptr<const Open> open_;
  std::vector<std::unique_ptr<Iterator>> cycle_;
  int64_t block_length_, epoch_;
  std::size_t turn_ = 0;
  int64_t taken_ = 0;
  bool input_done_ = false;
};

}  // namespace

Dataset Dataset::interleave(std::function<Dataset(const Example&)> open, int64_t cycle_length,
                            int64_t block_length) const {
  require(cycle_length >= 1, "interleave: cycle_length must be at least 1, got " + std::to_string(cycle_length));
  require(block_length >= 1, "interleave: block_length must be at least 1, got " + std::to_string(block_length));
  auto shared = std::make_shared<const Open>(std::move(open));
  return Dataset([input = *this, shared, cycle_length, block_length](int64_t epoch) {
    return std::make_unique<InterleaveIterator>(input.iterate(epoch), shared, cycle_length, block_length, epoch);
  });
}

Dataset Dataset::interleave(std::vector<Dataset> sources, int64_t block_length) {
  require(!sources.empty(), "interleave: no sources given; pass at least one dataset");
  Tensor index(DType::i32, {static_cast<int64_t>(sources.size())});
  for (std::size_t i = 0; i < sources.size(); ++i) index.data<int32_t>()[i] = static_cast<int32_t>(i);
  const int64_t n = static_cast<int64_t>(sources.size());
  return from_slices(Example().set("source", std::move(index)))
      .interleave([sources = std::move(sources)](const Example& e) { return sources[e.tensor("source").data<int32_t>()[0]]; },
                  n, block_length);
}

}  // namespace convoy::data
