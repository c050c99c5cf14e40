// Real replicas over MPI: run as `mpirun -np 2 convoy_mpi_tests` (any N >= 2;
// tests/dist.sh does). Every rank runs every test; only rank 0 prints the
// usual report, the others print their failures, and the exit code is
// non-zero when any rank failed.
//
// The promise under test: N replicas with batch B train to the same weights
// as one replica with batch N*B (gradients are averaged over replicas, and
// step k of the replicas sees exactly the examples of step k of the single
// run), with per-layer buckets or one allreduce, and with synchronised batch
// norm when the network has BN; the replicas' weights stay bit-identical;
// together they train on every example once per epoch.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <set>

#include "../recording_executable.h"
#include "convoy/core/threads.h"
#include "replica_checks.h"

namespace convoy {
namespace {

using testing::bn_net;
using testing::kBatch;
using testing::plain_net;
using testing::same_on_every_replica;
using testing::Trained;

dist::Strategy* g_plain = nullptr;     // one allreduce after backward
dist::Strategy* g_bucketed = nullptr;  // 1 KiB buckets during backward

TEST(Replicas, WithoutBatchNormTrainAsOneReplicaWithTheGlobalBatch) {
  testing::expect_equivalent(plain_net(), *g_plain, false, compile_cpu);
}

TEST(Replicas, GradientBucketsDuringBackwardGiveTheSameWeights) {
  testing::expect_equivalent(plain_net(), *g_bucketed, false, compile_cpu);
}

TEST(Replicas, WithSynchronisedBatchNormTrainAsOneReplicaWithTheGlobalBatch) {
  testing::expect_equivalent(bn_net(), *g_bucketed, true, compile_cpu);
}

// The equivalence test can fail: per-replica BN normalises each half batch
// on its own, which one replica with the whole batch does not.
TEST(Replicas, PerReplicaBatchNormDiffersFromTheGlobalBatch) {
  const Trained one = testing::train_model(bn_net(), kBatch * g_plain->world_size(), nullptr, false, compile_cpu);
  const Trained many = testing::train_model(bn_net(), kBatch, g_plain, false, compile_cpu);
  EXPECT_GT(testing::relative_error(many.params, one.params), 1e-4);
  EXPECT_TRUE(same_on_every_replica(*g_plain, many.params));
  EXPECT_TRUE(same_on_every_replica(*g_plain, many.state)) << "running statistics are averaged each epoch";
}

TEST(Replicas, TogetherTrainOnEveryExampleOncePerEpoch) {
  dist::Strategy& s = *g_plain;
  const int64_t n = 2 * kBatch * s.world_size() * 3 + 3;  // 6 steps per replica and a remainder
  struct Count : train::Callback {
    testing::RecordingExecutable* exe;
    std::vector<std::vector<int32_t>> epochs;
    void on_epoch_end(train::FitState&, const train::EpochRecord&) override {
      epochs.push_back(std::exchange(exe->seen, {}));
    }
  };
  testing::RecordingExecutable exe(kBatch);
  auto count = std::make_shared<Count>();
  count->exe = &exe;
  train::fit(exe, testing::indexed_examples(n), testing::indexed_examples(5),
             {.epochs = 2, .seed = 4, .callbacks = {count}, .strategy = &s});
  ASSERT_EQ(count->epochs.size(), 2u);
  for (const auto& seen : count->epochs) {
    std::vector<int64_t> visits(static_cast<std::size_t>(n));
    for (int32_t i : seen) ++visits[static_cast<std::size_t>(i)];
    s.allreduce_sum(std::span<int64_t>(visits));
    int64_t once = 0;
    for (int64_t v : visits) {
      EXPECT_LE(v, 1);
      once += v == 1;
    }
    EXPECT_EQ(once, n - 3) << "every example but the dropped remainder, once";
  }
}

// Any replica's callback may stop training; all replicas stop at the same step.
TEST(Replicas, StopTogetherWhenOneReplicaAsks) {
  dist::Strategy& s = *g_plain;
  struct StopAt : train::Callback {
    int64_t step;
    void on_batch_end(train::FitState& st, int64_t k, const Metrics&) override {
      if (k == step) st.stop_training = true;
    }
  };
  testing::RecordingExecutable exe(kBatch);
  train::Callbacks cbs;
  if (s.rank() == s.world_size() - 1) {
    auto stop = std::make_shared<StopAt>();
    stop->step = 3;
    cbs.push_back(stop);
  }
  train::fit(exe, testing::indexed_examples(kBatch * s.world_size() * 10), testing::indexed_examples(5),
             {.epochs = 3, .seed = 4, .callbacks = cbs, .strategy = &s});
  EXPECT_EQ(exe.seen.size(), static_cast<std::size_t>(3 * kBatch));
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  using namespace convoy;
  ::testing::InitGoogleTest(&argc, argv);
  // The first strategy initialises MPI and is destroyed last (it finalises).
  auto plain = dist::make_strategy({.name = "mpi", .timeout_seconds = 60});
  auto bucketed = dist::make_strategy({.name = "mpi", .timeout_seconds = 60, .bucket_kib = 1});
  g_plain = plain.get();
  g_bucketed = bucketed.get();
  if (plain->world_size() < 2) {
    std::fprintf(stderr, "convoy_mpi_tests: run under mpirun with 2 or more processes\n");
    return 1;
  }
  set_num_threads(1);  // same thread count for the single and the replicated runs
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (!plain->is_primary()) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new convoy::testing::FailurePrinter(plain->rank()));
  }
  int64_t failed = RUN_ALL_TESTS() != 0;
  plain->allreduce_sum(std::span<int64_t>(&failed, 1));
  return failed ? 1 : 0;
}
