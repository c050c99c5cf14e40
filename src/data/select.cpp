// Transformations that keep some examples and drop the rest: filter, skip,
// shard (a filter on positions) and take (which stops reading its input).
#include "convoy/core/error.h"
#include "convoy/data/dataset.h"

namespace convoy::data {
namespace {

using Keep = std::function<bool(const Example&, int64_t position)>;

class FilterIterator final : public Iterator {
 public:
  FilterIterator(std::unique_ptr<Iterator> input, std::shared_ptr<const Keep> keep)
      : input_(std::move(input)), keep_(std::move(keep)) {}
  std::optional<Example> next() override {
    while (auto e = input_->next())
      if ((*keep_)(*e, position_++)) return e;
    return std::nullopt;
  }

 private:
  std::unique_ptr<Iterator> input_;
  std::shared_ptr<const Keep> keep_;
  int64_t position_ = 0;
};

class TakeIterator final : public Iterator {
 public:
  TakeIterator(std::unique_ptr<Iterator> input, int64_t count) : input_(std::move(input)), left_(count) {}
  std::optional<Example> next() override {
    if (left_ == 0) return std::nullopt;
    --left_;
    return input_->next();
  }

 private:
  std::unique_ptr<Iterator> input_;
  int64_t left_;  // negative: no limit
};

Dataset keep_where(const Dataset& input, Keep keep) {
  auto shared = std::make_shared<const Keep>(std::move(keep));
  return Dataset([input, shared](int64_t epoch) { return std::make_unique<FilterIterator>(input.iterate(epoch), shared); });
}

}  // namespace

Dataset Dataset::filter(Predicate keep) const {
  require(static_cast<bool>(keep), "filter: the predicate is empty; pass a callable");
  return keep_where(*this, [keep = std::move(keep)](const Example& e, int64_t) { return keep(e); });
}

Dataset Dataset::filter_positions(std::function<bool(int64_t)> keep) const {
  require(static_cast<bool>(keep), "filter_positions: the predicate is empty; pass a callable");
  return keep_where(*this, [keep = std::move(keep)](const Example&, int64_t position) { return keep(position); });
}

Dataset Dataset::skip(int64_t count) const {
  require(count >= 0, "skip: count must be >= 0, got " + std::to_string(count));
  return filter_positions([count](int64_t position) { return position >= count; });
}

Dataset Dataset::shard(int64_t num_shards, int64_t index) const {
  require(num_shards >= 1, "shard: num_shards must be at least 1, got " + std::to_string(num_shards));
  require(index >= 0 && index < num_shards, "shard: index " + std::to_string(index) + " is outside [0, " +
                                                std::to_string(num_shards) + "); pass the replica's rank");
  return filter_positions([num_shards, index](int64_t position) { return position % num_shards == index; });
}

Dataset Dataset::take(int64_t count) const {
  require(count >= -1, "take: count must be >= 0, or -1 for all, got " + std::to_string(count));
  return Dataset([input = *this, count](int64_t epoch) { return std::make_unique<TakeIterator>(input.iterate(epoch), count); });
}

}  // namespace convoy::data
