// repeat: several passes over the input within one epoch. Pass r of epoch e
// iterates the input as its own inner epoch, so shuffles and random maps above
// the repeat differ between passes, reproducibly.
#include "convoy/core/error.h"
#include "convoy/data/dataset.h"

namespace convoy::data {
namespace {

class RepeatIterator final : public Iterator {
 public:
  RepeatIterator(Dataset input, int64_t count, int64_t epoch) : input_(std::move(input)), count_(count), epoch_(epoch) {}
  std::optional<Example> next() override {
    for (;;) {
      if (!pass_) {
        if (count_ >= 0 && passes_ == count_) return std::nullopt;
        pass_ = input_.iterate(inner_epoch());
        ++passes_;
        seen_in_pass_ = 0;
      }
      if (auto e = pass_->next()) {
        ++seen_in_pass_;
        return e;
      }
      pass_.reset();
      if (seen_in_pass_ == 0) return std::nullopt;  // an empty input would repeat forever
    }
  }

 private:
  int64_t inner_epoch() const {
    return static_cast<int64_t>(element_seed(static_cast<uint64_t>(epoch_), passes_, -2) >> 1);
  }
  Dataset input_;
  int64_t count_, epoch_, passes_ = 0, seen_in_pass_ = 0;
  std::unique_ptr<Iterator> pass_;
};

}  // namespace

Dataset Dataset::repeat(int64_t count) const {
  require(count >= -1, "repeat: count must be >= 0, or -1 for forever, got " + std::to_string(count));
  return Dataset([input = *this, count](int64_t epoch) { return std::make_unique<RepeatIterator>(input, count, epoch); });
}

}  // namespace convoy::data
