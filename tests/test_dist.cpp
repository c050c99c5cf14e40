// Data parallelism without MPI: the sharding of epochs and evaluation sets
// (replicas simulated one after the other), the backend's hooks, the
// watchdog, and the strategy factory's errors. tests/mpi/ runs real replicas.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <set>
#include <string>
#include <thread>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/dist/data_parallel.h"
#include "convoy/dist/watchdog.h"
#include "convoy/nn/sequential.h"
#include "convoy/train/fit.h"
#include "convoy/app/replicas.h"
#include "recording_executable.h"
#include "test_helpers.h"

namespace convoy {
namespace {

// Replica `rank` of `world` whose collectives do nothing: enough to see what
// one replica trains on, run by run.
class PretendReplica final : public dist::Strategy {
 public:
  PretendReplica(int rank, int world) : rank_(rank), world_(world) {}
  std::string name() const override { return "pretend"; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void allreduce_mean(std::span<float>) override {}
  void allreduce_sum(std::span<double>) override {}
  void allreduce_sum(std::span<int64_t>) override {}
  void broadcast(std::span<float>) override {}
  void barrier() override {}
  GradientReducer* gradient_reducer() override { return nullptr; }
  dist::CommStats stats() const override { return {}; }

 private:
  int rank_, world_;
};

// The labels (= example indices) replica `rank` of `world` trains on in each of `epochs` epochs.
std::vector<std::vector<int32_t>> seen_per_epoch(const data::LabeledImages& d, int64_t batch, int rank, int world,
                                                 int64_t epochs) {
  struct Snapshot : train::Callback {
    testing::RecordingExecutable* exe;
    std::vector<std::vector<int32_t>> epochs;
    void on_epoch_end(train::FitState&, const train::EpochRecord&) override { epochs.push_back(std::exchange(exe->seen, {})); }
  };
  testing::RecordingExecutable exe(batch);
  auto snap = std::make_shared<Snapshot>();
  snap->exe = &exe;
  PretendReplica replica(rank, world);
  train::fit(exe, d, testing::indexed_examples(4), {.epochs = epochs, .seed = 3, .callbacks = {snap}, .strategy = &replica});
  return snap->epochs;
}

TEST(DataParallel, ReplicasTogetherTrainOnEveryExampleOncePerEpoch) {
  const auto d = testing::indexed_examples(96);  // 96 = 2 replicas x 6 steps x batch 8
  const auto r0 = seen_per_epoch(d, 8, 0, 2, 2), r1 = seen_per_epoch(d, 8, 1, 2, 2);
  ASSERT_EQ(r0.size(), 2u);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(r0[e].size(), 48u);
    EXPECT_EQ(r1[e].size(), 48u);
    std::multiset<int32_t> all(r0[e].begin(), r0[e].end());
    all.insert(r1[e].begin(), r1[e].end());
    EXPECT_EQ(all.size(), 96u);
    EXPECT_EQ(std::set<int32_t>(all.begin(), all.end()).size(), 96u) << "an example was trained on twice";
  }
  EXPECT_NE(r0[0], r0[1]) << "each epoch must reshuffle";
}

TEST(DataParallel, UnevenDataGivesEqualShardsAndDropsOnlyTheRemainder) {
  // 101 examples, 3 replicas, batch 4: 33 per replica, 8 steps each, 96 trained.
  const auto d = testing::indexed_examples(101);
  std::set<int32_t> all;
  for (int r = 0; r < 3; ++r) {
    const auto seen = seen_per_epoch(d, 4, r, 3, 1).at(0);
    EXPECT_EQ(seen.size(), 32u) << "replica " << r;
    for (int32_t i : seen) EXPECT_TRUE(all.insert(i).second) << "example " << i << " twice";
  }
  EXPECT_EQ(all.size(), 96u);
}

// Step k of two replicas with batch B sees the examples of step k of one
// replica with batch 2B: the data half of the gradient equivalence.
TEST(DataParallel, StepKOfTheReplicasIsStepKOfOneReplicaWithTheGlobalBatch) {
  const auto d = testing::indexed_examples(100);
  const auto one = seen_per_epoch(d, 16, 0, 1, 1).at(0);
  const auto r0 = seen_per_epoch(d, 8, 0, 2, 1).at(0), r1 = seen_per_epoch(d, 8, 1, 2, 1).at(0);
  ASSERT_EQ(one.size(), 96u);
  ASSERT_EQ(r0.size(), 48u);
  for (std::size_t k = 0; k < 6; ++k) {
    std::set<int32_t> global(one.begin() + 16 * k, one.begin() + 16 * (k + 1));
    std::set<int32_t> replicas(r0.begin() + 8 * k, r0.begin() + 8 * (k + 1));
    replicas.insert(r1.begin() + 8 * k, r1.begin() + 8 * (k + 1));
    EXPECT_EQ(global, replicas) << "step " << k;
  }
}

// The trainer's batch-at-a-time positions (data/index_batches.h) keep the
// order of the per-element chain they replaced, replica by replica: the same
// seed trains on the same batches, and old checkpoints resume into them.
TEST(DataParallel, EpochOrderIsThePerElementShuffleShardedAndBatched) {
  const auto d = testing::indexed_examples(101);
  for (int world : {1, 3})
    for (int r = 0; r < world; ++r) {
      const auto seen = seen_per_epoch(d, 4, r, world, 2);
      const data::Dataset chain =
          dist::shard(data::Dataset::range(101).shuffle(101, 3), 101, PretendReplica(r, world)).batch(4, true);
      for (int64_t e = 1; e <= 2; ++e) {
        std::vector<int32_t> expected;
        for (data::Example& b : chain.epoch(e))
          for (int32_t i : b.tensor("index").data<int32_t>()) expected.push_back(i);
        EXPECT_EQ(seen.at(static_cast<std::size_t>(e - 1)), expected) << "replica " << r << " of " << world << ", epoch " << e;
      }
    }
}

TEST(DataParallel, EvaluationShardsCoverTheTestSetOnceInOrder) {
  const auto d = testing::indexed_examples(10);
  std::vector<int32_t> joined;
  for (int r = 0; r < 3; ++r) {
    const dist::EvalShard s(d, PretendReplica(r, 3));
    const auto labels = s.data().labels.data<int32_t>();
    joined.insert(joined.end(), labels.begin(), labels.end());
  }
  std::vector<int32_t> want(10);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(joined, want);
  const dist::EvalShard whole(d, dist::single());
  EXPECT_EQ(&whole.data(), &d) << "one replica evaluates the data itself, not a copy";
}

TEST(DataParallel, ScaleLrMultipliesEveryLearningRateByTheReplicas) {
  train::RunConfig c;
  c.lr = 0.01;
  c.schedule.max_lr = 0.1;
  c.schedule.min_lr = 0.001;
  c.reduce_lr_on_plateau = train::ReduceLrOptions{.min_lr = 0.002};
  EXPECT_DOUBLE_EQ(train::scaled_for_replicas(c, 8).lr, 0.01);  // off by default
  c.scale_lr = true;
  const auto s = train::scaled_for_replicas(c, 8);
  EXPECT_DOUBLE_EQ(s.lr, 0.08);
  EXPECT_DOUBLE_EQ(s.schedule.max_lr, 0.8);
  EXPECT_DOUBLE_EQ(s.schedule.min_lr, 0.008);
  EXPECT_DOUBLE_EQ(s.reduce_lr_on_plateau->min_lr, 0.016);
  c.lr = 1e38;  // a float, but not 8 times over: it trained with lr inf
  EXPECT_NE(testing::error_of([&] { train::scaled_for_replicas(c, 8); })
                .find("optimizer.lr times 8 replicas (training.scale_lr) is more than a float holds"),
            std::string::npos);
}

nn::Sequential small_bn_net() {
  return nn::Sequential({1, 8, 8}, {nn::Conv2d{.filters = 3, .kernel = 3}, nn::ReLU{}, nn::BatchNorm{}, nn::Flatten{},
                                    nn::Dense{.units = 4}, nn::LogSoftmax{}});
}

data::LabeledImages random_examples(int64_t n, uint64_t seed) {
  data::LabeledImages d{Tensor(DType::f32, {n, 1, 8, 8}), Tensor(DType::i32, {n})};
  Rng rng(seed);
  for (float& x : d.images.data<float>()) x = rng.uniform(-1, 1);
  for (int32_t& y : d.labels.data<int32_t>()) y = static_cast<int32_t>(rng.below(4));
  return d;
}

struct Recorder final : GradientReducer {
  std::vector<std::span<float>> ready_slices;
  std::span<float> finished;
  float scale = 1;
  void ready(std::span<float> g) override { ready_slices.push_back(g); }
  void finish(std::span<float> g) override {
    finished = g;
    for (float& x : g) x *= scale;
  }
};

TEST(DataParallel, BackwardAnnouncesEveryLayersGradientsLastLayerFirst) {
  auto exe = compile_cpu(small_bn_net(), {.batch_size = 4, .optimizer = {.lr = 0.1f}}, 1);
  const auto d = random_examples(4, 2);
  Recorder rec;
  exe->internals().set_gradient_reducer(&rec);
  exe->train_step(d.images.data<float>().data(), d.labels.data<int32_t>().data());
  ASSERT_EQ(rec.ready_slices.size(), 3u);  // dense, batch norm, conv
  ASSERT_EQ(rec.finished.size(), static_cast<std::size_t>(exe->internals().size(Held::parameters)));
  // Adjacent slices, descending, tiling the whole buffer.
  const float* end = rec.finished.data() + rec.finished.size();
  for (const auto& s : rec.ready_slices) {
    EXPECT_EQ(s.data() + s.size(), end);
    end = s.data();
  }
  EXPECT_EQ(end, rec.finished.data());
}

TEST(DataParallel, TheUpdateUsesTheReducedGradients) {
  auto exe = compile_cpu(small_bn_net(), {.batch_size = 4, .optimizer = {.lr = 0.1f}}, 1);
  const auto d = random_examples(4, 2);
  std::vector<float> before(static_cast<std::size_t>(exe->internals().size(Held::parameters))), after(before.size());
  exe->internals().read(Held::parameters, before);
  Recorder zero;
  zero.scale = 0;  // a reducer that zeroes the gradients: no step may move a weight
  exe->internals().set_gradient_reducer(&zero);
  exe->train_step(d.images.data<float>().data(), d.labels.data<int32_t>().data());
  exe->internals().read(Held::parameters, after);
  EXPECT_EQ(before, after);
  exe->internals().set_gradient_reducer(nullptr);
  exe->train_step(d.images.data<float>().data(), d.labels.data<int32_t>().data());
  exe->internals().read(Held::parameters, after);
  EXPECT_NE(before, after);
}

// Two replicas that happen to see the same batch: the global sums are twice
// the local ones, so synchronised BN must normalise exactly as local BN does.
TEST(DataParallel, SynchronisedBatchNormSumsStatisticsThroughTheHook) {
  const auto d = random_examples(4, 5);
  auto run = [&](bool synced, int* calls) {
    auto exe = compile_cpu(small_bn_net(), {.batch_size = 4, .optimizer = {.lr = 0.1f, .momentum = 0.5f}}, 1);
    if (synced)
      exe->internals().set_batch_norm_reducer([calls](std::span<double> sums) {
        ++*calls;
        for (double& s : sums) s *= 2;
      });
    for (int i = 0; i < 3; ++i) exe->train_step(d.images.data<float>().data(), d.labels.data<int32_t>().data());
    std::vector<float> p(
        static_cast<std::size_t>(exe->internals().size(Held::parameters) + exe->internals().size(Held::state)));
    exe->internals().read(Held::parameters, std::span<float>(p).first(exe->internals().size(Held::parameters)));
    exe->internals().read(Held::state, std::span<float>(p).subspan(exe->internals().size(Held::parameters)));
    return p;
  };
  int calls = 0;
  const auto local = run(false, &calls), synced = run(true, &calls);
  EXPECT_EQ(calls, 3 * 3);  // per step: mean and variance forward, one backward
  // Running variance's unbiasing uses the global count (2x), so compare the
  // parameters and the running means tightly, the variance loosely.
  EXPECT_LT(testing::relative_error(synced, local), 0.05);
  const std::size_t params = local.size() - 6;
  EXPECT_LT(testing::relative_error(std::span<const float>(synced).first(params + 3),
                                    std::span<const float>(local).first(params + 3)),
            1e-5);
}

TEST(DataParallel, TheConfigsDistributedSectionRoundTripsAndIsChecked) {
  const auto c = train::parse_run_config(
      "distributed: {strategy: mpi, scale_lr: true, sync_batch_norm: true, timeout_seconds: 5, bucket_kib: 64}\n", "d.yaml",
      true);
  EXPECT_EQ(c.strategy, "mpi");
  EXPECT_TRUE(c.scale_lr);
  EXPECT_TRUE(c.sync_batch_norm);
  EXPECT_DOUBLE_EQ(c.dist_timeout, 5);
  EXPECT_EQ(c.bucket_kib, 64);
  // Checkpoints store the JSON form: resuming keeps the strategy.
  const auto again = train::parse_run_config(train::run_config_json(c), "again", false);
  EXPECT_EQ(train::run_config_json(again), train::run_config_json(c));
  auto error = [](const std::string& yaml) {
    return testing::error_of([&] { train::parse_run_config(yaml, "d.yaml", true); });
  };
  EXPECT_NE(error("distributed: {strategy: gloo}").find("distributed.strategy"), std::string::npos);
  EXPECT_NE(error("distributed: {timeout_seconds: 0}").find("--dist-timeout"), std::string::npos);
  EXPECT_NE(error("distributed: {bucket_kib: -1}").find("bucket_kib"), std::string::npos);
  EXPECT_NE(error("distributed: {replicas: 8}").find("unknown key 'distributed.replicas'"), std::string::npos);
}

TEST(Watchdog, ReportsAWaitThatOutlastsTheTimeout) {
  std::atomic<int> fired{0};
  std::string what;
  std::mutex m;
  dist::Watchdog w(0.05, [&](const char* w, double waited) {
    std::lock_guard lock(m);
    what = w;
    EXPECT_GE(waited, 0.05);
    ++fired;
  });
  w.enter("the gradient allreduce");
  const auto start = std::chrono::steady_clock::now();
  while (fired == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  w.leave();
  EXPECT_EQ(fired, 1);
  std::lock_guard lock(m);
  EXPECT_EQ(what, "the gradient allreduce");
}

TEST(Watchdog, StaysQuietForWaitsShorterThanTheTimeout) {
  std::atomic<int> fired{0};
  dist::Watchdog w(0.2, [&](const char*, double) { ++fired; });
  for (int i = 0; i < 20; ++i) {
    w.enter("a barrier");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    w.leave();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // idle: nothing to report
  EXPECT_EQ(fired, 0);
}

TEST(Strategy, NamesWhatIsWrong) {
  EXPECT_NE(testing::error_of([] { dist::make_strategy({.name = "gloo"}); }).find("unknown strategy 'gloo'"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { dist::make_strategy({.name = "single", .timeout_seconds = 0}); })
                .find("--dist-timeout"),
            std::string::npos);
  auto single = dist::make_strategy({.name = "single"});
  EXPECT_EQ(single->world_size(), 1);
  EXPECT_TRUE(single->is_primary());
  EXPECT_EQ(single->gradient_reducer(), nullptr);
}

// Under mpirun without --strategy mpi every process would train alone and all
// would write the same files.
TEST(Strategy, SingleRefusesToBeOneOfSeveralLaunchedProcesses) {
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  const std::string err = testing::error_of([] { dist::make_strategy({.name = "single"}); });
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  EXPECT_NE(err.find("one of 4"), std::string::npos) << err;
  EXPECT_NE(err.find("--strategy mpi"), std::string::npos) << err;
}

}  // namespace
}  // namespace convoy
