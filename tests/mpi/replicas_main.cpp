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
#include "../test_helpers.h"
#include "convoy/backends/executable.h"
#include "convoy/core/threads.h"
#include "convoy/dist/data_parallel.h"
#include "convoy/train/fit.h"

namespace convoy {
namespace {

dist::Strategy* g_plain = nullptr;     // one allreduce after backward
dist::Strategy* g_bucketed = nullptr;  // 1 KiB buckets during backward

constexpr int64_t kBatch = 8;  // per replica

nn::Sequential plain_net() {
  return nn::Sequential({1, 12, 12}, {nn::Conv2d{.filters = 4, .kernel = 3}, nn::MaxPool2d{.kernel = 2}, nn::ReLU{},
                                      nn::Conv2d{.filters = 6, .kernel = 3}, nn::ReLU{}, nn::Flatten{},
                                      nn::Dense{.units = 24}, nn::ReLU{}, nn::Dense{.units = 10}, nn::LogSoftmax{}});
}

// The seed CNN's pattern (BN after conv blocks, BN on a vector) in small.
nn::Sequential bn_net() {
  return nn::Sequential({1, 12, 12}, {nn::Conv2d{.filters = 4, .kernel = 3}, nn::MaxPool2d{.kernel = 2}, nn::ReLU{},
                                      nn::BatchNorm{}, nn::Conv2d{.filters = 6, .kernel = 3}, nn::ReLU{},
                                      nn::BatchNorm{}, nn::Flatten{}, nn::Dense{.units = 24}, nn::ReLU{},
                                      nn::BatchNorm{}, nn::Dense{.units = 10}, nn::LogSoftmax{}});
}

data::LabeledImages random_examples(int64_t n, uint64_t seed) {
  data::LabeledImages d{Tensor(DType::f32, {n, 1, 12, 12}), Tensor(DType::i32, {n})};
  Rng rng(seed);
  for (float& x : d.images.data<float>()) x = rng.uniform(-1, 1);
  for (int32_t& y : d.labels.data<int32_t>()) y = static_cast<int32_t>(rng.below(10));
  return d;
}

struct Trained {
  std::vector<float> initial, params, state;
  train::History history;
};

// Two epochs of SGD with momentum; strategy nullptr: one replica.
Trained train_model(const nn::Sequential& net, int64_t batch, dist::Strategy* s, bool sync_bn) {
  const auto train = random_examples(8 * kBatch * 2 + 5, 1);  // 8 steps per epoch, a remainder to drop
  const auto test = random_examples(37, 2);
  auto exe = compile_cpu(net, {.batch_size = batch, .optimizer = {.lr = 0.05f, .momentum = 0.5f}}, 7);
  if (s) dist::attach(*s, *exe, sync_bn);
  Trained t;
  t.initial.resize(static_cast<std::size_t>(exe->parameter_count()));
  exe->get_parameters(t.initial);
  t.history = train::fit(*exe, train, test, {.epochs = 2, .seed = 11, .strategy = s});
  t.params.resize(static_cast<std::size_t>(exe->parameter_count()));
  t.state.resize(static_cast<std::size_t>(exe->state_count()));
  exe->get_parameters(t.params);
  exe->get_state(t.state);
  return t;
}

// Every replica holds exactly rank 0's bits.
bool same_on_every_replica(dist::Strategy& s, std::vector<float> v) {
  std::vector<float> root = v;
  s.broadcast(root);
  int64_t differs = !v.empty() && std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) != 0;
  s.allreduce_sum(std::span<int64_t>(&differs, 1));
  return differs == 0;
}

void expect_equivalent(const nn::Sequential& net, dist::Strategy& s, bool sync_bn) {
  const int world = s.world_size();
  const Trained one = train_model(net, kBatch * world, nullptr, false);
  const Trained many = train_model(net, kBatch, &s, sync_bn);
  // Per tensor: max |difference| <= 1e-5 x the tensor's largest weight; and
  // what training changed (final - initial weights), to 1e-4 of the largest change.
  std::vector<float> moved_many(one.params.size()), moved_one(one.params.size());
  for (std::size_t i = 0; i < one.params.size(); ++i) {
    moved_many[i] = many.params[i] - many.initial[i];
    moved_one[i] = one.params[i] - one.initial[i];
  }
  for (const auto& layer : net.layers())
    for (const auto& p : layer.params) {
      auto slice = [&](const std::vector<float>& v) { return std::span<const float>(v).subspan(p.offset, p.size()); };
      EXPECT_LT(testing::relative_error(slice(many.params), slice(one.params)), 1e-5) << p.name << ", replica " << s.rank();
      EXPECT_LT(testing::relative_error(slice(moved_many), slice(moved_one)), 1e-4)
          << p.name << " update, replica " << s.rank();
    }
  if (!one.state.empty()) {
    EXPECT_LT(testing::relative_error(many.state, one.state), 1e-5) << "BN running statistics";
  }
  EXPECT_TRUE(same_on_every_replica(s, many.params)) << "the replicas' weights drifted apart";
  EXPECT_TRUE(same_on_every_replica(s, many.state));
  // Metrics are summed over replicas: the same as one replica's.
  ASSERT_EQ(many.history.epochs.size(), 2u);
  EXPECT_EQ(many.history.images_trained, one.history.images_trained);
  for (std::size_t e = 0; e < 2; ++e) {
    const auto &m = many.history.epochs[e], &o = one.history.epochs[e];
    EXPECT_NEAR(m.train_loss, o.train_loss, 1e-5 * o.train_loss);
    EXPECT_NEAR(m.test_loss, o.test_loss, 1e-5 * o.test_loss);
    EXPECT_DOUBLE_EQ(m.test_accuracy, o.test_accuracy);
  }
}

TEST(Replicas, WithoutBatchNormTrainAsOneReplicaWithTheGlobalBatch) { expect_equivalent(plain_net(), *g_plain, false); }

TEST(Replicas, GradientBucketsDuringBackwardGiveTheSameWeights) { expect_equivalent(plain_net(), *g_bucketed, false); }

TEST(Replicas, WithSynchronisedBatchNormTrainAsOneReplicaWithTheGlobalBatch) {
  expect_equivalent(bn_net(), *g_bucketed, true);
}

// The equivalence test can fail: per-replica BN normalises each half batch
// on its own, which one replica with the whole batch does not.
TEST(Replicas, PerReplicaBatchNormDiffersFromTheGlobalBatch) {
  const Trained one = train_model(bn_net(), kBatch * g_plain->world_size(), nullptr, false);
  const Trained many = train_model(bn_net(), kBatch, g_plain, false);
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

// Prints other ranks' failures, tagged; rank 0 keeps gtest's full report.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[replica %d] %s:%d: %s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                   r.summary());
  }

 private:
  int rank_;
};

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
    listeners.Append(new FailurePrinter(plain->rank()));
  }
  int64_t failed = RUN_ALL_TESTS() != 0;
  plain->allreduce_sum(std::span<int64_t>(&failed, 1));
  return failed ? 1 : 0;
}
