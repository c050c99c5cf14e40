// The input pipeline's transformations: order, counts, epoch boundaries.
#include <algorithm>
#include <atomic>
#include <fstream>
#include <optional>
#include <set>

#include <gtest/gtest.h>
#include <unistd.h>

#include "convoy/core/error.h"
#include "convoy/core/temporary_files.h"
#include "convoy/data/labeled_images.h"
#include "convoy/data/transforms.h"
#include "test_helpers.h"
#include "test_pipeline_helpers.h"

namespace convoy::data {
namespace {

using testing::iota;
using testing::ints;
using testing::values;
using testing::x_of;

std::vector<int32_t> sorted(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST(Pipeline, FromSlicesYieldsEachRowInOrderWithItsOwnCopy) {
  Tensor images(DType::u8, {3, 1, 2, 2});
  for (int i = 0; i < 12; ++i) images.data<uint8_t>()[i] = static_cast<uint8_t>(i);
  auto d = Dataset::from_slices(Example().set("image", images).set_texts("id", {"a", "b", "c"}));
  int row = 0;
  for (Example& e : d.epoch(0)) {
    EXPECT_EQ(e.tensor("image").shape(), (Shape{1, 2, 2}));
    EXPECT_EQ(e.tensor("image").data<uint8_t>()[0], 4 * row);
    EXPECT_EQ(e.text("id"), std::string(1, static_cast<char>('a' + row)));
    e.tensor("image").data<uint8_t>()[0] = 99;  // must not reach the source
    ++row;
  }
  EXPECT_EQ(row, 3);
  EXPECT_EQ(d.iterate(1)->next()->tensor("image").data<uint8_t>()[0], 0);
  EXPECT_EQ(values(ints(5)), iota(5));
}

TEST(Pipeline, FromSlicesRejectsColumnsOfDifferentLengths) {
  Example columns;
  columns.set("x", Tensor(DType::i32, {3})).set_texts("id", {"a", "b"});
  EXPECT_THROW(Dataset::from_slices(columns), UserError);
  EXPECT_THROW(Dataset::from_slices(Example()), UserError);
}

TEST(Pipeline, MissingFeatureNamesWhatTheExampleHas) {
  auto e = ints(1).iterate()->next();
  try {
    (void)e->tensor("image");
    FAIL();
  } catch (const UserError& err) {
    EXPECT_NE(std::string(err.what()).find("'image'"), std::string::npos);
    EXPECT_NE(std::string(err.what()).find("x: i32 []"), std::string::npos);
  }
}

TEST(Pipeline, MapAndFilterKeepOrder) {
  EXPECT_EQ(values(ints(5).map(testing::plus_one)), iota(5, 1));
  EXPECT_EQ(values(ints(10).filter([](const Example& e) { return x_of(e) % 3 == 0; })),
            (std::vector<int32_t>{0, 3, 6, 9}));
}

TEST(Pipeline, TakeStopsReadingAndSkipDropsTheFirst) {
  std::atomic<int> pulled{0};
  auto counted = ints(10).map([&](Example e, Rng&) {
    ++pulled;
    return e;
  });
  EXPECT_EQ(values(counted.take(3)), iota(3));
  EXPECT_EQ(pulled, 3);
  EXPECT_EQ(values(ints(10).take(-1)), iota(10));
  EXPECT_EQ(values(ints(10).take(0)), std::vector<int32_t>{});
  EXPECT_EQ(values(ints(10).skip(7)), iota(3, 7));
  EXPECT_EQ(values(ints(10).skip(20)), std::vector<int32_t>{});
  EXPECT_EQ(values(ints(10).skip(2).take(3)), iota(3, 2));
  EXPECT_THROW(ints(3).take(-2), UserError);
  EXPECT_THROW(ints(3).skip(-1), UserError);
}

TEST(Pipeline, ShardsAreDisjointAndCoverTheDataset) {
  const auto all = ints(10);
  std::vector<int32_t> seen;
  std::vector<std::size_t> sizes;
  for (int s = 0; s < 3; ++s) {
    auto shard = values(all.shard(3, s));
    for (int32_t v : shard) EXPECT_EQ(v % 3, s);
    sizes.push_back(shard.size());
    seen.insert(seen.end(), shard.begin(), shard.end());
  }
  EXPECT_EQ(sorted(seen), iota(10));  // every example once: disjoint and covering
  EXPECT_EQ(sizes, (std::vector<std::size_t>{4, 3, 3}));
  EXPECT_EQ(values(all.shard(1, 0)), iota(10));
  EXPECT_THROW(all.shard(3, 3), UserError);
  EXPECT_THROW(all.shard(3, -1), UserError);
  EXPECT_THROW(all.shard(0, 0), UserError);
}

TEST(Pipeline, BatchStacksContiguousTensorsAndHonoursDropRemainder) {
  Tensor images(DType::f32, {10, 1, 2, 2});
  for (int i = 0; i < 40; ++i) images.data<float>()[i] = static_cast<float>(i);
  Tensor labels(DType::i32, {10});
  for (int i = 0; i < 10; ++i) labels.data<int32_t>()[i] = i;
  auto d = Dataset::from_slices(Example().set("image", images).set("label", labels).set_texts(
      "id", {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}));

  std::vector<int64_t> sizes;
  int64_t offset = 0;
  for (Example& b : d.batch(4).epoch(0)) {
    const int64_t n = b.tensor("label").dim(0);
    sizes.push_back(n);
    EXPECT_EQ(b.tensor("image").shape(), (Shape{n, 1, 2, 2}));
    EXPECT_EQ(b.texts("id").size(), static_cast<std::size_t>(n));
    auto x = b.tensor("image").data<float>();
    for (int64_t i = 0; i < 4 * n; ++i) EXPECT_EQ(x[i], static_cast<float>(4 * offset + i));  // contiguous NCHW
    EXPECT_EQ(b.tensor("label").data<int32_t>()[0], offset);
    EXPECT_EQ(b.texts("id")[0], std::to_string(offset));
    offset += n;
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));

  sizes.clear();
  for (Example& b : d.batch(4, /*drop_remainder=*/true).epoch(0)) sizes.push_back(b.tensor("label").dim(0));
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(values(ints(3).batch(5, true)), std::vector<int32_t>{});
  EXPECT_EQ(values(ints(10).batch(5, true)), iota(10));
  EXPECT_THROW(d.batch(0), UserError);
}

TEST(Pipeline, BatchRejectsExamplesOfDifferentShapes) {
  auto ragged = ints(4).map([](Example e, Rng&) {
    e.set("v", Tensor(DType::f32, {testing::x_of(e) + 1}));
    return e;
  });
  EXPECT_THROW(values(ragged.batch(2)), UserError);
}

TEST(Pipeline, ShufflePermutesReproduciblyAndReshufflesPerEpoch) {
  const auto d = ints(100).shuffle(100, 7);
  const auto e0 = values(d, 0), e1 = values(d, 1);
  EXPECT_EQ(sorted(e0), iota(100));
  EXPECT_EQ(sorted(e1), iota(100));
  EXPECT_NE(e0, iota(100));
  EXPECT_NE(e0, e1);                             // a fresh order per epoch
  EXPECT_EQ(e0, values(ints(100).shuffle(100, 7), 0));  // the same for the same seed and epoch
  EXPECT_NE(e0, values(ints(100).shuffle(100, 8), 0));
  const auto fixed = ints(100).shuffle(100, 7, /*reshuffle_each_epoch=*/false);
  EXPECT_EQ(values(fixed, 0), values(fixed, 5));
  EXPECT_THROW(ints(3).shuffle(0, 1), UserError);
}

TEST(Pipeline, ShuffleBufferBoundsHowFarAheadAnOutputCanComeFrom) {
  EXPECT_EQ(values(ints(50).shuffle(1, 3)), iota(50));  // a buffer of one changes nothing
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const auto out = values(ints(50).shuffle(5, seed));
    EXPECT_EQ(sorted(out), iota(50));
    for (std::size_t k = 0; k < out.size(); ++k) EXPECT_LT(out[k], static_cast<int32_t>(5 + k));
  }
  // A buffer as large as the data can put any element first.
  std::set<int32_t> firsts;
  for (uint64_t seed = 0; seed < 200; ++seed) firsts.insert(values(ints(10).shuffle(10, seed)).front());
  EXPECT_EQ(firsts.size(), 10u);
}

TEST(Pipeline, RepeatMakesPassesAndReshufflesEachPass) {
  EXPECT_EQ(values(ints(3).repeat(2)), (std::vector<int32_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(values(ints(3).repeat(0)), std::vector<int32_t>{});
  EXPECT_EQ(values(ints(3).repeat(-1).take(7)), (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 0}));
  EXPECT_EQ(values(ints(0).repeat(-1)), std::vector<int32_t>{});  // ends instead of spinning
  const auto passes = values(ints(20).shuffle(20, 1).repeat(2));
  const std::vector<int32_t> first(passes.begin(), passes.begin() + 20), second(passes.begin() + 20, passes.end());
  EXPECT_EQ(sorted(first), iota(20));
  EXPECT_EQ(sorted(second), iota(20));
  EXPECT_NE(first, second);
  EXPECT_EQ(passes, values(ints(20).shuffle(20, 1).repeat(2)));
  EXPECT_NE(passes, values(ints(20).shuffle(20, 1).repeat(2), 1));
}

// The seed's rule: work before cache() runs once, work after it every epoch,
// so augmentation after the cache is re-drawn per epoch.
TEST(Pipeline, CachePlacementRunsWorkAboveOnceAndBelowEveryEpoch) {
  std::atomic<int> above{0}, below{0};
  auto draw = [](Example e, Rng& rng) {
    e.set("draw", Tensor(DType::i32, {}));
    e.tensor("draw").data<int32_t>()[0] = static_cast<int32_t>(rng.below(1 << 30));
    return e;
  };
  auto d = ints(8)
               .map([&](Example e, Rng& rng) {
                 ++above;
                 return draw(std::move(e), rng);
               }, {.seed = 1})
               .cache()
               .map([&](Example e, Rng& rng) {
                 ++below;
                 e.set("aug", draw(Example(), rng).tensor("draw"));
                 return e;
               }, {.seed = 2});
  std::vector<std::vector<int32_t>> pre, post;
  for (int epoch = 0; epoch < 3; ++epoch) {
    pre.emplace_back();
    post.emplace_back();
    for (Example& e : d.epoch(epoch)) {
      pre.back().push_back(e.tensor("draw").data<int32_t>()[0]);
      post.back().push_back(e.tensor("aug").data<int32_t>()[0]);
    }
  }
  EXPECT_EQ(above, 8);       // once
  EXPECT_EQ(below, 3 * 8);   // every epoch
  EXPECT_EQ(pre[0], pre[1]);  // replayed as drawn in the first epoch
  EXPECT_EQ(pre[0], pre[2]);
  EXPECT_NE(post[0], post[1]);  // re-drawn
  EXPECT_NE(post[1], post[2]);
}

TEST(Pipeline, CacheKeepsOnlyACompleteEpochAndHandsOutCopies) {
  std::atomic<int> above{0};
  auto d = ints(5)
               .map([&](Example e, Rng&) {
                 ++above;
                 return e;
               })
               .cache();
  for (Example& e : d.epoch(0))
    if (testing::x_of(e) == 1) break;  // a partial first epoch is not kept
  EXPECT_EQ(above, 2);
  for (Example& e : d.epoch(1)) e.tensor("x").data<int32_t>()[0] = -1;  // changes a copy only
  EXPECT_EQ(above, 7);
  EXPECT_EQ(values(d, 2), iota(5));
  EXPECT_EQ(above, 7);
}

TEST(Pipeline, CacheToFileIsReusedByLaterEpochsAndRuns) {
  convoy::testing::TempDir dir;
  const std::string path = dir.file("train.cache");
  std::atomic<int> above{0};
  auto source = ints(6).map([&](Example e, Rng&) {
    ++above;
    e.set_text("id", "n" + std::to_string(testing::x_of(e)));
    return e;
  });
  for (Example& e : source.cache(path).epoch(0))
    if (testing::x_of(e) == 2) break;
  EXPECT_FALSE(std::filesystem::exists(path));  // a partial epoch leaves nothing behind
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()), {}), 0);

  EXPECT_EQ(values(source.cache(path), 0), iota(6));
  EXPECT_TRUE(std::filesystem::exists(path));
  const int after_fill = above;
  auto again = source.cache(path);  // a new dataset (a new run) with the same file
  EXPECT_EQ(values(again, 1), iota(6));
  EXPECT_EQ(above, after_fill);
  auto e = again.iterate(2)->next();
  EXPECT_EQ(e->text("id"), "n0");

  std::ofstream(path, std::ios::trunc | std::ios::binary) << "convoy-examples-1\n\x01";
  EXPECT_THROW(values(again), UserError);
  std::ofstream(path, std::ios::trunc | std::ios::binary) << "not a cache";
  EXPECT_THROW(values(again), UserError);
}

// A process that must end at once (a second Ctrl-C, a crash) removes the
// cache file it was filling: its temporary is named as convoy's others and
// listed while it is written.
TEST(Pipeline, ACacheFileBeingFilledIsAListedConvoyTemporary) {
  convoy::testing::TempDir dir;
  const std::string path = dir.file("train.cache");
  auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir.path()))
      names.push_back(entry.path().filename().string());
    return names;
  };
  auto it = ints(4).cache(path).iterate(0);
  ASSERT_TRUE(it->next());
  const auto during = listing();
  ASSERT_EQ(during.size(), 1u);
  EXPECT_EQ(during[0].rfind("train.cache.", 0), 0u) << during[0];
  EXPECT_NE(during[0].find(std::string(convoy::kTemporaryMark) + std::to_string(::getpid())), std::string::npos)
      << during[0];
  convoy::remove_in_flight_temporaries(/*process_ends=*/false);  // what the handlers do before the process ends
  EXPECT_TRUE(listing().empty());
}

TEST(Pipeline, ZipJoinsFeaturesAndEndsWithTheShortest) {
  auto other = Dataset::from_slices(Example().set_texts("id", {"a", "b", "c"}));
  std::vector<std::string> ids;
  std::vector<int32_t> xs;
  for (Example& e : Dataset::zip({ints(5), other}).epoch(0)) {
    xs.push_back(testing::x_of(e));
    ids.push_back(e.text("id"));
  }
  EXPECT_EQ(xs, iota(3));
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_THROW(values(Dataset::zip({ints(2), ints(2)})), UserError);  // both name a feature x
}

TEST(Pipeline, InterleaveTakesBlocksInTurnAndSkipsExhaustedSources) {
  const auto a = ints(3, 0), b = ints(5, 10);
  EXPECT_EQ(values(Dataset::interleave({a, b})), (std::vector<int32_t>{0, 10, 1, 11, 2, 12, 13, 14}));
  EXPECT_EQ(values(Dataset::interleave({a, b}, 2)), (std::vector<int32_t>{0, 1, 10, 11, 2, 12, 13, 14}));
  // Opening a dataset per input element with two open at a time: the third
  // source starts when the first is used up.
  auto opened = ints(3).interleave([](const Example& e) { return ints(2, 100 * testing::x_of(e)); }, 2);
  EXPECT_EQ(values(opened), (std::vector<int32_t>{0, 100, 1, 101, 200, 201}));
  EXPECT_THROW(ints(3).interleave([](const Example&) { return ints(1); }, 0), UserError);
}

TEST(Pipeline, OneHotAndMultiHotLabels) {
  Tensor labels(DType::i32, {2});
  labels.data<int32_t>()[0] = 2;
  labels.data<int32_t>()[1] = 0;
  auto it = Dataset::from_slices(Example().set("label", labels)).map(one_hot("label", 4)).iterate();
  EXPECT_EQ(it->next()->tensor("label").data<float>()[2], 1.0f);
  auto second = it->next();
  EXPECT_EQ(second->tensor("label").shape(), (Shape{4}));
  EXPECT_EQ(std::vector<float>(second->tensor("label").data<float>().begin(), second->tensor("label").data<float>().end()),
            (std::vector<float>{1, 0, 0, 0}));

  Tensor multi(DType::u8, {1, 2});
  multi.data<uint8_t>()[0] = 1;
  multi.data<uint8_t>()[1] = 3;
  auto m = Dataset::from_slices(Example().set("label", multi)).map(one_hot("label", 4)).iterate()->next();
  EXPECT_EQ(std::vector<float>(m->tensor("label").data<float>().begin(), m->tensor("label").data<float>().end()),
            (std::vector<float>{0, 1, 0, 1}));
  auto it3 = ints(5).map(one_hot("x", 3)).iterate();
  for (int i = 0; i < 3; ++i) it3->next();
  EXPECT_THROW(it3->next(), UserError);  // class 3 is outside [0, 3)
}

TEST(Pipeline, NormalizeGivesTheFloatsOfFromU8) {
  Tensor images(DType::u8, {2, 3, 3});
  for (int i = 0; i < 18; ++i) images.data<uint8_t>()[i] = static_cast<uint8_t>(i * 14);
  Tensor labels(DType::u8, {2});
  const LabeledImages reference = from_u8(images, labels, 0.1307f, 0.3081f, "test");
  auto d = Dataset::from_slices(Example().set("image", images)).map(normalize("image", 0.1307f, 0.3081f)).batch(2);
  const Tensor got = d.iterate()->next()->tensor("image");
  ASSERT_EQ(got.numel(), reference.images.numel());
  EXPECT_TRUE(std::equal(got.data<float>().begin(), got.data<float>().end(), reference.images.data<float>().begin()));
}

TEST(Pipeline, RandomFlipMirrorsTheWidthReproducibly) {
  Tensor images(DType::u8, {64, 1, 2, 3});
  for (int64_t i = 0; i < images.numel(); ++i) images.data<uint8_t>()[i] = static_cast<uint8_t>(i % 6);
  auto d = Dataset::from_slices(Example().set("image", images)).map(random_flip("image"), {.seed = 5});
  int flipped = 0;
  std::vector<uint8_t> first;
  for (Example& e : d.epoch(0)) {
    auto px = e.tensor("image").data<uint8_t>();
    const bool mirrored = px[0] == 2;
    const std::vector<uint8_t> want =
        mirrored ? std::vector<uint8_t>{2, 1, 0, 5, 4, 3} : std::vector<uint8_t>{0, 1, 2, 3, 4, 5};
    EXPECT_EQ(std::vector<uint8_t>(px.begin(), px.end()), want);
    flipped += mirrored;
    first.push_back(px[0]);
  }
  EXPECT_GT(flipped, 16);
  EXPECT_LT(flipped, 48);
  std::vector<uint8_t> again;
  for (Example& e : d.epoch(0)) again.push_back(e.tensor("image").data<uint8_t>()[0]);
  EXPECT_EQ(first, again);
}

TEST(Pipeline, StratifiedSplitKeepsClassProportionsReproducibly) {
  Tensor labels(DType::i32, {60});
  for (int i = 0; i < 60; ++i) labels.data<int32_t>()[i] = i < 10 ? 0 : i < 30 ? 1 : 2;  // 10, 20, 30
  Tensor x(DType::i32, {60});
  for (int i = 0; i < 60; ++i) x.data<int32_t>()[i] = i;
  const auto d = Dataset::from_slices(Example().set("x", x).set("label", labels));
  const auto split = stratified_split(d, 0.2, 3);
  const auto train = values(split.train), validation = values(split.validation);
  std::vector<int> per_class(3);
  for (int32_t v : validation) ++per_class[labels.data<int32_t>()[v]];
  EXPECT_EQ(per_class, (std::vector<int>{2, 4, 6}));
  std::vector<int32_t> both = train;
  both.insert(both.end(), validation.begin(), validation.end());
  EXPECT_EQ(sorted(both), iota(60));  // disjoint and covering
  EXPECT_TRUE(std::is_sorted(train.begin(), train.end()));
  EXPECT_EQ(validation, values(stratified_split(d, 0.2, 3).validation));
  EXPECT_NE(validation, values(stratified_split(d, 0.2, 4).validation));
  EXPECT_THROW(stratified_split(d, 1.5, 3), UserError);
}

TEST(Pipeline, ShuffledPositionsLookedUpGiveTheExamples) {
  Tensor images(DType::u8, {6, 2, 2});
  for (int i = 0; i < 24; ++i) images.data<uint8_t>()[i] = static_cast<uint8_t>(i);
  Tensor labels(DType::u8, {6});
  for (int i = 0; i < 6; ++i) labels.data<uint8_t>()[i] = static_cast<uint8_t>(i);
  const LabeledImages data = from_u8(images, labels, 0.0f, 1.0f, "test");
  auto it = Dataset::range(6).shuffle(6, 2).map(rows_of(data)).iterate();
  std::vector<int32_t> seen;
  while (auto e = it->next()) {
    const int32_t label = e->tensor("label").data<int32_t>()[0];
    EXPECT_EQ(e->tensor("image").shape(), (Shape{1, 2, 2}));
    EXPECT_EQ(e->tensor("image").data<float>()[0], static_cast<float>(4 * label) / 255.0f);
    seen.push_back(label);
  }
  EXPECT_EQ(sorted(seen), iota(6));
  // Batching the positions first gathers whole batches (what the trainer does).
  auto batched = Dataset::range(6).shuffle(6, 2).batch(4, /*drop_remainder=*/true).map(rows_of(data)).iterate();
  auto b = batched->next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->tensor("image").shape(), (Shape{4, 1, 2, 2}));
  for (int i = 0; i < 4; ++i) {
    const int32_t label = b->tensor("label").data<int32_t>()[i];
    EXPECT_EQ(label, seen[i]);  // same order as the unbatched stream
    EXPECT_EQ(b->tensor("image").data<float>()[i * 4 + 3], static_cast<float>(4 * label + 3) / 255.0f);
  }
  EXPECT_FALSE(batched->next().has_value());
  // An index past the rows is the user's error, in a batch as alone (rows 4..7 of 6).
  auto past = Dataset::range(8).batch(4, /*drop_remainder=*/true).map(rows_of(data)).iterate();
  EXPECT_TRUE(past->next().has_value());
  EXPECT_THROW(past->next(), UserError);
  EXPECT_EQ(values(Dataset::range(0).map([](Example e, Rng&) { return e; })), std::vector<int32_t>{});
  EXPECT_THROW(Dataset::range(-1), UserError);
}

// The trainer's input when its threads take every core (train::in_memory):
// the same batches as rows_of, gathered by the caller's OpenMP threads into a
// recycled tensor that is never one a consumer still holds.
TEST(Pipeline, RowsOnThreadsGiveRowsOfBatchesAndNeverReuseAHeldOne) {
  Tensor images(DType::u8, {300, 3, 5});
  for (int i = 0; i < 300 * 15; ++i) images.data<uint8_t>()[i] = static_cast<uint8_t>(i * 7 % 251);
  Tensor labels(DType::u8, {300});
  for (int i = 0; i < 300; ++i) labels.data<uint8_t>()[i] = static_cast<uint8_t>(i % 10);
  const LabeledImages data = from_u8(images, labels, 0.5f, 0.25f, "test");
  const Dataset positions = Dataset::range(300).shuffle(300, 5).batch(64, /*drop_remainder=*/true);
  auto want = positions.map(rows_of(data)).iterate(1);
  auto got = positions.map(rows_of_on_threads(data)).iterate(1);
  std::optional<Example> held;  // a batch kept while the next ones are gathered
  std::vector<float> held_copy;
  int batches = 0;
  while (auto w = want->next()) {
    auto g = got->next();
    ASSERT_TRUE(g.has_value());
    ++batches;
    EXPECT_EQ(g->tensor("image").shape(), w->tensor("image").shape());
    const auto gi = g->tensor("image").data<float>(), wi = w->tensor("image").data<float>();
    EXPECT_TRUE(std::equal(gi.begin(), gi.end(), wi.begin(), wi.end()));
    const auto gl = g->tensor("label").data<int32_t>(), wl = w->tensor("label").data<int32_t>();
    EXPECT_TRUE(std::equal(gl.begin(), gl.end(), wl.begin(), wl.end()));
    if (batches == 1) {
      held_copy.assign(gi.begin(), gi.end());
      held = std::move(g);
    }
  }
  EXPECT_EQ(batches, 4);
  EXPECT_FALSE(got->next().has_value());
  const auto h = held->tensor("image").data<float>();
  EXPECT_TRUE(std::equal(h.begin(), h.end(), held_copy.begin(), held_copy.end()));
  // A bad index throws a UserError from the calling thread, as rows_of does.
  auto bad = Dataset::range(301).batch(64).map(rows_of_on_threads(data)).iterate(0);
  EXPECT_THROW(
      {
        while (bad->next()) {
        }
      },
      UserError);
}

TEST(Pipeline, FromIdxReadsImagesAsChwBytesAndLabelsAsInts) {
  convoy::testing::TempDir dir;
  auto write = [&](const std::string& name, std::vector<uint32_t> dims, std::vector<uint8_t> data) {
    std::string s = {0, 0, 8, static_cast<char>(dims.size())};
    for (uint32_t d : dims)
      for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((d >> shift) & 0xff));
    s.append(data.begin(), data.end());
    std::ofstream(dir.file(name), std::ios::binary) << s;
  };
  write("images", {2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  write("labels", {2}, {7, 9});
  auto it = Dataset::from_idx(dir.file("images"), dir.file("labels")).iterate();
  auto e = it->next();
  EXPECT_EQ(e->tensor("image").shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(e->tensor("image").dtype(), DType::u8);
  EXPECT_EQ(e->tensor("label").data<int32_t>()[0], 7);
  EXPECT_EQ(it->next()->tensor("image").data<uint8_t>()[3], 8);
  EXPECT_FALSE(it->next());
  write("three_labels", {3}, {1, 2, 3});
  EXPECT_THROW(Dataset::from_idx(dir.file("images"), dir.file("three_labels")), UserError);
  EXPECT_THROW(Dataset::from_idx(dir.file("missing"), dir.file("labels")), UserError);
  EXPECT_THROW(Dataset::fashion_mnist(dir.path(), "train"), UserError);
  EXPECT_THROW(Dataset::fashion_mnist(dir.path(), "validation"), UserError);
}

}  // namespace convoy::data
