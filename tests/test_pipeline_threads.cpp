// The input pipeline's threads: parallel map determinism, prefetch, errors
// surfacing in the consumer, and clean shutdown when the consumer stops early.
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "convoy/core/error.h"
#include "convoy/core/thread_pool.h"
#include "convoy/core/threads.h"
#include "test_helpers.h"
#include "test_pipeline_helpers.h"

namespace convoy::data {
namespace {

using testing::iota;
using testing::ints;
using testing::values;
using testing::x_of;

// Stores a random draw in the example and takes a varying time, so elements
// finish out of order on several threads.
Example draw_slowly(Example e, Rng& rng) {
  const uint64_t r = rng.next_u64();
  std::this_thread::sleep_for(std::chrono::microseconds(r % 200));
  e.set("draw", Tensor(DType::i32, {}));
  e.tensor("draw").data<int32_t>()[0] = static_cast<int32_t>(r >> 33);
  return e;
}

std::vector<std::pair<int32_t, int32_t>> x_and_draw(const Dataset& d, int64_t epoch = 0) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (Example& e : d.epoch(epoch)) out.emplace_back(x_of(e), e.tensor("draw").data<int32_t>()[0]);
  return out;
}

}  // namespace

TEST(PipelineThreads, PoolRunsEveryTaskAndDrainsOnDestruction) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(3);
    EXPECT_EQ(pool.size(), 3);
    for (int i = 0; i < 1000; ++i) pool.submit([&] { ++ran; });
  }
  EXPECT_EQ(ran, 1000);
}

TEST(PipelineThreads, ParallelMapGivesTheSameOrderAndDrawsWhateverTheThreads) {
  const auto source = ints(200).shuffle(50, 9);
  const auto reference = x_and_draw(source.map(draw_slowly, {.parallelism = 1, .seed = 4}), 3);
  for (int parallelism : {2, 4, 8, kAutotune})
    EXPECT_EQ(x_and_draw(source.map(draw_slowly, {.parallelism = parallelism, .seed = 4}), 3), reference)
        << "parallelism " << parallelism;
  EXPECT_NE(x_and_draw(source.map(draw_slowly, {.seed = 4}), 4), reference);  // another epoch, other draws
}

TEST(PipelineThreads, NonDeterministicMapKeepsEachElementsDraws) {
  const auto source = ints(200);
  auto reference = x_and_draw(source.map(draw_slowly, {.seed = 4}));
  auto got = x_and_draw(source.map(draw_slowly, {.parallelism = 8, .deterministic = false, .seed = 4}));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, reference);  // same (element, draw) pairs, in whatever order they finished
}

TEST(PipelineThreads, PrefetchKeepsOrderAndOverlapsAcrossEpochs) {
  const auto d = ints(100).map(draw_slowly, {.parallelism = 4}).prefetch(8);
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<int32_t> xs;
    for (auto& [x, draw] : x_and_draw(d, epoch)) xs.push_back(x);
    EXPECT_EQ(xs, iota(100));
  }
  EXPECT_EQ(values(ints(10).prefetch(1).batch(3)), iota(10));
  EXPECT_THROW(ints(3).prefetch(0), UserError);
}

TEST(PipelineThreads, MapErrorNamesTheElementAndKeepsItsKind) {
  auto fail_at_5 = [](Example e, Rng&) {
    if (x_of(e) == 5) throw UserError("cannot decode");
    return e;
  };
  for (int parallelism : {1, 4})
    for (int64_t prefetch : {0, 2}) {
      auto d = ints(20).map(fail_at_5, {.parallelism = parallelism});
      if (prefetch) d = d.prefetch(prefetch);
      std::vector<int32_t> before;
      const std::string msg = convoy::testing::error_of<UserError>([&] {
        for (Example& e : d.epoch(3)) before.push_back(x_of(e));
      });
      EXPECT_NE(msg.find("element 5 of epoch 3"), std::string::npos) << msg;
      EXPECT_NE(msg.find("cannot decode"), std::string::npos) << msg;
      EXPECT_EQ(before, iota(5));  // the elements before it arrive first
    }
  auto files = Dataset::from_slices(Example().set_texts("file", {"a.png", "b.png"}));
  const std::string msg = convoy::testing::error_of<std::runtime_error>([&] {
    values(files.map([](Example e, Rng&) -> Example { throw std::runtime_error("bad PNG"); }, {.parallelism = 2}));
  });
  EXPECT_EQ(msg.rfind("a.png: bad PNG", 0), 0u) << msg;  // the file, not "map: element 0 ..."
}

// A worker out of memory (a huge image, a full machine) ends the epoch with a
// UserError the CLI reports as "out of memory ..." with exit 2, on every
// thread layout, not as an internal error.
TEST(PipelineThreads, OutOfMemoryInAMapIsAUserErrorNamingTheFile) {
  auto files = Dataset::from_slices(Example().set_texts("file", {"a.png", "huge.png"}));
  for (int parallelism : {1, 2})
    for (int64_t prefetch : {0, 2}) {
      auto d = files.map([](Example e, Rng&) -> Example {
        if (e.text("file") == "huge.png") throw std::bad_alloc();
        return e;
      }, {.parallelism = parallelism});
      if (prefetch) d = d.prefetch(prefetch);
      const std::string msg = convoy::testing::error_of<UserError>([&] {
        for (Example& e : d.epoch(0)) (void)e;
      });
      EXPECT_EQ(msg.rfind("out of memory while preparing huge.png", 0), 0u) << msg;
    }
}

// Leaving an epoch early (break or exception) must stop every thread and wait
// for the work in flight, whatever the pipeline still had to do.
TEST(PipelineThreads, StoppingEarlyShutsDownCleanly) {
  std::atomic<int> active{0}, started{0};
  auto slow = [&](Example e, Rng&) {
    ++active;
    ++started;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --active;
    return e;
  };
  const auto forever = ints(10).repeat(-1).map(slow, {.parallelism = 4}).prefetch(4).batch(2).prefetch(2);
  const auto t0 = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < 20; ++epoch) {
    int batches = 0;
    for (Example& b : forever.epoch(epoch)) {
      (void)b;
      if (++batches == 3) break;
    }
    EXPECT_EQ(active, 0);  // nothing still running once the loop is left
  }
  EXPECT_THROW(
      {
        for (Example& b : forever.epoch(99)) {
          (void)b;
          throw UserError("the step failed");
        }
      },
      UserError);
  EXPECT_EQ(active, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  const int after = started;
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(started, after);  // and nothing starts later
}

TEST(PipelineThreads, AnIteratorDroppedBeforeItsFirstElementStopsToo) {
  const auto d = ints(1000).map(draw_slowly, {.parallelism = kAutotune}).prefetch(16);
  for (int i = 0; i < 50; ++i) d.iterate(i);  // opened and dropped at once
  auto it = d.iterate(0);
  EXPECT_EQ(x_of(*it->next()), 0);
}

}  // namespace convoy::data

// --threads sizes the input pipeline's pool as well as OpenMP's, whichever
// thread first uses the pool. In a fresh process (the pool is made once).
TEST(PipelineThreadsDeathTest, TheSharedPoolHasTheConfiguredThreadCount) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        convoy::set_num_threads(3);
        int size = 0;
        std::thread([&] { size = convoy::ThreadPool::shared().size(); }).join();
        std::exit(size == 3 ? 0 : 10 + size);
      },
      ::testing::ExitedWithCode(0), "");
}
