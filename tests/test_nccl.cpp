// The nccl strategy (docs/distributed.md), in one process:
//   everywhere: a config may name it, it cannot train on the CPU, and without
//     a usable GPU (or NCCL) it stops in one line saying why;
//   on a GPU (skipped otherwise): a group of one replica, whose averages are
//     the identity, exercises everything on the device — the reducer's
//     buckets on its own stream, their capture into CUDA graphs, and
//     synchronised batch norm, whose own kernels must then agree with cuDNN's
//     batch norm and with the CPU's. Two replicas need two GPUs:
//     tests/mpi/nccl_replicas_main.cpp under mpirun (bench/gpu_check.sh).
#include <gtest/gtest.h>

#include <memory>

#include "convoy/backends/executable_internals.h"
#include "convoy/dist/nccl.h"
#include "convoy/dist/strategy.h"
#include "convoy/nn/sequential.h"
#include "convoy/config/run_config.h"
#include "cuda_test_helpers.h"

namespace convoy {
namespace {

using testing::relative_error;

// The group's tests need the real GPU and NCCL; each says which is missing.
#define SKIP_WITHOUT_NCCL_GPU()                                                                                \
  do {                                                                                                         \
    const GpuReport& gpus = find_gpus();                                                                       \
    if (!gpus.usable()) GTEST_SKIP() << "no usable GPU: " << gpus.why_unusable;                               \
    if (testing::cpu_as_gpu()) GTEST_SKIP() << "NCCL works on GPU memory: the CPU cannot stand in for the GPU"; \
    if (const std::string why = dist::nccl_unavailable(); !why.empty()) GTEST_SKIP() << why;                   \
  } while (0)

bool nccl_strategy_can_start() {
  return find_gpus().usable() && dist::nccl_unavailable().empty();
}

TEST(NcclStrategy, ConfigsNameItButNotWithTheCpu) {
  const auto config = [](const std::string& distributed) {
    return train::parse_run_config(R"({"training": {"device": "cpu"}, "distributed": )" + distributed + "}", "c.json",
                                   false);
  };
  EXPECT_EQ(train::parse_run_config(R"({"distributed": {"strategy": "nccl"}})", "c.json", false).strategy, "nccl");
  const std::string err = testing::error_of([&] { config(R"({"strategy": "nccl"})"); });
  EXPECT_NE(err.find("--strategy mpi"), std::string::npos) << err;
  EXPECT_NO_THROW(config(R"({"strategy": "mpi"})"));
  EXPECT_NE(testing::error_of([&] { config(R"({"strategy": "gloo"})"); }).find("single, mpi or nccl"),
            std::string::npos);
}

// On a machine without a GPU (this one's CI), or a build without NCCL: one
// line that says what is missing, before MPI starts.
TEST(NcclStrategy, WithoutAGpuOrNcclItStopsInOneLineSayingWhy) {
  if (nccl_strategy_can_start()) GTEST_SKIP() << "a GPU and NCCL are here: the strategy starts (gpu_check.sh runs it)";
  const std::string err = testing::error_of([] { dist::make_strategy({.name = "nccl"}); });
  EXPECT_NE(err, "(no exception)");
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  const bool says_why = err.find("no usable GPU") != std::string::npos || err.find("install") != std::string::npos ||
                        err.find("reconfigure") != std::string::npos;
  EXPECT_TRUE(says_why) << err;
  EXPECT_NE(err.find("nccl"), std::string::npos) << err;
}

// --- one replica on the GPU

nn::Sequential plain_net() {
  return nn::Sequential({1, 12, 12}, {nn::Conv2d{.filters = 4, .kernel = 3}, nn::MaxPool2d{.kernel = 2}, nn::ReLU{},
                                      nn::Conv2d{.filters = 6, .kernel = 3}, nn::ReLU{}, nn::Flatten{},
                                      nn::Dense{.units = 24}, nn::ReLU{}, nn::Dense{.units = 10}, nn::LogSoftmax{}});
}

// BN on images and on a vector, as the seed CNN.
nn::Sequential bn_net() {
  return nn::Sequential({1, 12, 12}, {nn::Conv2d{.filters = 4, .kernel = 3}, nn::MaxPool2d{.kernel = 2}, nn::ReLU{},
                                      nn::BatchNorm{}, nn::Conv2d{.filters = 6, .kernel = 3}, nn::ReLU{},
                                      nn::BatchNorm{}, nn::Flatten{}, nn::Dense{.units = 24}, nn::ReLU{},
                                      nn::BatchNorm{}, nn::Dense{.units = 10}, nn::LogSoftmax{}});
}

constexpr int64_t kBatch = 16;
constexpr int64_t kSteps = 12;  // with 2 per call: 2 eager calls, 2 captures, 2 replays

std::unique_ptr<dist::NcclGroup> one_replica(int64_t bucket_kib) {
  return std::make_unique<dist::NcclGroup>(dist::nccl_new_id(), 0, 1, /*gpu=*/0,
                                           dist::NcclOptions{.timeout_seconds = 30, .bucket_kib = bucket_kib});
}

CompileOptions sgd(int64_t steps_per_execution = 1) {
  CompileOptions o{.batch_size = kBatch, .optimizer = {.lr = 0.05f, .momentum = 0.5f},
                   .steps_per_execution = steps_per_execution};
  o.gpu.tf32 = false;
  return o;
}

// kSteps training steps on fixed batches, `per_call` batches per train_steps
// call; returns the parameters and the BN running statistics.
struct Trained {
  std::vector<float> params, state;
};
Trained train_steps(Executable& exe, int64_t per_call) {
  const auto x = testing::uniform_values(kSteps * kBatch * 144, 3);
  const auto y = testing::class_indices(kSteps * kBatch, 10, 4);
  for (int64_t s = 0; s < kSteps; s += per_call)
    EXPECT_EQ(exe.train_steps(x.data() + s * kBatch * 144, y.data() + s * kBatch, per_call), per_call);
  return {testing::parameters(exe), testing::state(exe)};
}

// One replica's average is its own gradient: with the group attached (one
// allreduce, or buckets of 1 KiB on the group's stream) training is unchanged.
TEST(NcclGroup, OneReplicaTrainsAsWithoutTheGroup) {
  SKIP_WITHOUT_NCCL_GPU();
  const nn::Sequential model = plain_net();
  auto alone = compile_cuda(model, sgd(), 9);
  const Trained want = train_steps(*alone, 1);
  for (int64_t bucket_kib : {0, 1}) {
    auto group = one_replica(bucket_kib);
    auto exe = compile_cuda(model, sgd(), 9);
    exe->internals().set_gradient_reducer(group->gradient_reducer());
    const Trained got = train_steps(*exe, 1);
    testing::expect_per_tensor(model, got.params, want.params, 1e-5, bucket_kib ? "bucketed" : "one allreduce");
    EXPECT_GT(group->stats().collectives, 0);
    exe->internals().set_gradient_reducer(nullptr);  // before the group goes
  }
}

// The collectives are captured into the CUDA graphs of steps_per_execution:
// the first execution runs eagerly, the second is captured, the third replays.
TEST(NcclGroup, BucketsRideInsideCudaGraphs) {
  SKIP_WITHOUT_NCCL_GPU();
  const nn::Sequential model = plain_net();
  auto alone = compile_cuda(model, sgd(), 9);
  const Trained want = train_steps(*alone, 1);
  auto group = one_replica(1);
  auto exe = compile_cuda(model, sgd(2), 9);
  exe->internals().set_gradient_reducer(group->gradient_reducer());
  const Trained got = train_steps(*exe, 2);
  testing::expect_per_tensor(model, got.params, want.params, 1e-5, "weights after graphs with NCCL");
  exe->internals().set_gradient_reducer(nullptr);
}

// Synchronised batch norm runs convoy's own kernels: over one replica they
// must give cuDNN's batch norm (and the CPU's synchronised one): loss,
// gradients, running statistics, then weights after training steps, in
// eager steps and in graphs.
TEST(NcclGroup, SynchronisedBatchNormOfOneReplicaIsPlainBatchNorm) {
  SKIP_WITHOUT_NCCL_GPU();
  const nn::Sequential model = bn_net();
  const auto x = testing::uniform_values(kBatch * 144, 5);
  const auto y = testing::class_indices(kBatch, 10, 6);
  auto cudnn = compile_cuda(model, sgd(), 9);
  auto cpu = compile_cpu(model, sgd(), 9);
  cpu->internals().set_batch_norm_reducer([](std::span<double>) {});  // the CPU's synchronised path, one replica
  auto group = one_replica(1);
  auto own = compile_cuda(model, sgd(), 9);
  own->internals().set_gradient_reducer(group->gradient_reducer());
  own->internals().set_batch_norm_reducer([](std::span<double>) {});  // a request: the sums travel through the group

  const double want = cudnn->internals().loss_and_gradients(x.data(), y.data());
  const double cpu_loss = cpu->internals().loss_and_gradients(x.data(), y.data());
  const double got = own->internals().loss_and_gradients(x.data(), y.data());
  EXPECT_NEAR(got, want, 1e-5 * want);
  EXPECT_NEAR(got, cpu_loss, 1e-5 * cpu_loss);
  testing::expect_per_tensor(model, testing::gradients(*own), testing::gradients(*cudnn), 1e-4, "gradient vs cuDNN");
  testing::expect_per_tensor(model, testing::gradients(*own), testing::gradients(*cpu), 1e-4, "gradient vs the CPU");
  EXPECT_LT(relative_error(testing::state(*own), testing::state(*cudnn)), 1e-5) << "running statistics";

  auto plain = compile_cuda(model, sgd(), 9);
  const Trained trained_plain = train_steps(*plain, 1);
  auto graphs = compile_cuda(model, sgd(2), 9);
  graphs->internals().set_gradient_reducer(group->gradient_reducer());
  graphs->internals().set_batch_norm_reducer([](std::span<double>) {});
  const Trained trained_own = train_steps(*graphs, 2);
  testing::expect_per_tensor(model, trained_own.params, trained_plain.params, 1e-4, "weights after steps");
  EXPECT_LT(relative_error(trained_own.state, trained_plain.state), 1e-4) << "running statistics after steps";
  own->internals().set_gradient_reducer(nullptr);
  graphs->internals().set_gradient_reducer(nullptr);
}

// The GPU takes only a reducer that works on the device.
TEST(NcclGroup, TheGpuRefusesHostReducersAndUnbackedSyncBatchNorm) {
  SKIP_WITHOUT_GPU();
  if (testing::cpu_as_gpu()) GTEST_SKIP() << "the CPU backend takes host reducers";
  struct HostReducer : GradientReducer {
    void finish(std::span<float>) override {}
  } host;
  auto exe = compile_cuda(plain_net(), sgd(), 9);
  const std::string err = testing::error_of([&] { exe->internals().set_gradient_reducer(&host); });
  EXPECT_NE(err.find("--strategy nccl"), std::string::npos) << err;
  const std::string bn = testing::error_of([&] { exe->internals().set_batch_norm_reducer([](std::span<double>) {}); });
  EXPECT_NE(bn.find("--strategy nccl"), std::string::npos) << bn;
}

}  // namespace
}  // namespace convoy
