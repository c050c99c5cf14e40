#pragma once
// The replicas' promises, shared by the MPI strategy's test (replicas_main.cpp,
// CPU) and the nccl strategy's (nccl_replicas_main.cpp, GPUs): N replicas
// with batch B train to the weights of one replica with batch N*B, and their
// weights stay bit-identical. `compile` builds each executable (CPU or GPU).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>

#include "../test_helpers.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/dist/data_parallel.h"
#include "convoy/nn/sequential.h"
#include "convoy/train/fit.h"

namespace convoy::testing {

using Compile = std::function<std::unique_ptr<Executable>(const nn::Model&, const CompileOptions&, uint64_t)>;

constexpr int64_t kBatch = 8;  // per replica

inline nn::Sequential plain_net() {
  return nn::Sequential({1, 12, 12}, {nn::Conv2d{.filters = 4, .kernel = 3}, nn::MaxPool2d{.kernel = 2}, nn::ReLU{},
                                      nn::Conv2d{.filters = 6, .kernel = 3}, nn::ReLU{}, nn::Flatten{},
                                      nn::Dense{.units = 24}, nn::ReLU{}, nn::Dense{.units = 10}, nn::LogSoftmax{}});
}

// The seed CNN's pattern (BN after conv blocks, BN on a vector) in small.
inline nn::Sequential bn_net() {
  return nn::Sequential({1, 12, 12}, {nn::Conv2d{.filters = 4, .kernel = 3}, nn::MaxPool2d{.kernel = 2}, nn::ReLU{},
                                      nn::BatchNorm{}, nn::Conv2d{.filters = 6, .kernel = 3}, nn::ReLU{},
                                      nn::BatchNorm{}, nn::Flatten{}, nn::Dense{.units = 24}, nn::ReLU{},
                                      nn::BatchNorm{}, nn::Dense{.units = 10}, nn::LogSoftmax{}});
}

inline data::LabeledImages random_examples(int64_t n, uint64_t seed) {
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
inline Trained train_model(const nn::Sequential& net, int64_t batch, dist::Strategy* s, bool sync_bn,
                           const Compile& compile) {
  const auto train = random_examples(8 * kBatch * 2 + 5, 1);  // 8 steps per epoch, a remainder to drop
  const auto test = random_examples(37, 2);
  auto exe = compile(net, {.batch_size = batch, .optimizer = {.lr = 0.05f, .momentum = 0.5f}}, 7);
  if (s) dist::attach(*s, *exe, sync_bn);
  Trained t;
  t.initial.resize(static_cast<std::size_t>(exe->internals().size(Held::parameters)));
  exe->internals().read(Held::parameters, t.initial);
  t.history = train::fit(*exe, train, test, {.epochs = 2, .seed = 11, .strategy = s});
  t.params.resize(static_cast<std::size_t>(exe->internals().size(Held::parameters)));
  t.state.resize(static_cast<std::size_t>(exe->internals().size(Held::state)));
  exe->internals().read(Held::parameters, t.params);
  exe->internals().read(Held::state, t.state);
  return t;
}

// Every replica holds exactly rank 0's bits.
inline bool same_on_every_replica(dist::Strategy& s, std::vector<float> v) {
  std::vector<float> root = v;
  s.broadcast(root);
  int64_t differs = !v.empty() && std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) != 0;
  s.allreduce_sum(std::span<int64_t>(&differs, 1));
  return differs == 0;
}

inline void expect_equivalent(const nn::Sequential& net, dist::Strategy& s, bool sync_bn, const Compile& compile) {
  const int world = s.world_size();
  const Trained one = train_model(net, kBatch * world, nullptr, false, compile);
  const Trained many = train_model(net, kBatch, &s, sync_bn, compile);
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
      EXPECT_LT(relative_error(slice(many.params), slice(one.params)), 1e-5) << p.name << ", replica " << s.rank();
      EXPECT_LT(relative_error(slice(moved_many), slice(moved_one)), 1e-4)
          << p.name << " update, replica " << s.rank();
    }
  if (!one.state.empty()) {
    EXPECT_LT(relative_error(many.state, one.state), 1e-5) << "BN running statistics";
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

}  // namespace convoy::testing
