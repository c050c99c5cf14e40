// index_batches and shuffled_positions: the trainer's batch-at-a-time
// positions must be exactly what the per-element chain
// range(n).shuffle(n, seed).batch(B) gives, so runs keep their order (and
// checkpoints resume into the same batches) across the change.
#include <gtest/gtest.h>

#include "convoy/core/error.h"
#include "convoy/data/index_batches.h"
#include "test_pipeline_helpers.h"

namespace convoy::data {
namespace {

// Every batch's `index` values, batch by batch.
std::vector<std::vector<int32_t>> index_rows(const Dataset& d, int64_t epoch) {
  std::vector<std::vector<int32_t>> out;
  for (Example& e : d.epoch(epoch)) {
    const auto v = e.tensor("index").data<int32_t>();
    out.emplace_back(v.begin(), v.end());
  }
  return out;
}

}  // namespace

TEST(Pipeline, ShuffledPositionsAreTheWholeDatasetShufflesOrder) {
  for (int64_t n : {0, 1, 2, 7, 1000})
    for (uint64_t seed : {0ull, 2ull, 12345ull})
      for (int64_t epoch : {0, 1, 5}) {
        const Dataset chain = Dataset::range(n).shuffle(n > 0 ? n : 1, seed);
        std::vector<int32_t> expected;
        for (Example& e : chain.epoch(epoch)) expected.push_back(e.tensor("index").data<int32_t>()[0]);
        EXPECT_EQ(shuffled_positions(n, seed, epoch), expected) << "n " << n << " seed " << seed << " epoch " << epoch;
      }
  EXPECT_NE(shuffled_positions(100, 2, 1), shuffled_positions(100, 2, 2)) << "each epoch must reshuffle";
  EXPECT_THROW(shuffled_positions(-1, 2, 1), UserError);
}

TEST(Pipeline, IndexBatchesAreRangeBatchedOverTheEpochsPositions) {
  const int64_t n = 10;
  const PositionOrder order = [n](int64_t epoch) { return shuffled_positions(n, 7, epoch); };
  for (bool drop : {false, true})
    for (int64_t size : {1, 3, 5, 10, 11})
      for (int64_t epoch : {1, 2}) {
        const Dataset chain = Dataset::range(n).shuffle(n, 7).batch(size, drop);
        EXPECT_EQ(index_rows(index_batches(order, size, drop), epoch), index_rows(chain, epoch))
            << "size " << size << " drop " << drop << " epoch " << epoch;
      }
  // The order runs once per opened epoch, with that epoch's number.
  int opened = 0;
  const Dataset counted = index_batches(
      [&](int64_t epoch) {
        ++opened;
        return std::vector<int32_t>(static_cast<std::size_t>(epoch), 0);
      },
      2, false);
  EXPECT_EQ(index_rows(counted, 3).size(), 2u);  // [0, 0], [0]
  EXPECT_EQ(opened, 1);
  // Skipping batches skips whole batches of positions.
  EXPECT_EQ(index_rows(index_batches(order, 3, true).skip(2), 1),
            (std::vector<std::vector<int32_t>>{index_rows(index_batches(order, 3, true), 1)[2]}));
  EXPECT_THROW(index_batches(order, 0, true), UserError);
  EXPECT_THROW(index_batches(nullptr, 3, true), UserError);
}

}  // namespace convoy::data
