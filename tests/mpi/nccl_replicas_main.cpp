// Real replicas on GPUs: run as `mpirun -np 2 convoy_nccl_mpi_tests` on a
// machine with 2 or more GPUs (bench/gpu_check.sh does; NCCL takes one
// replica per GPU, so one GPU cannot host two). The nccl strategy keeps the
// MPI strategy's promises (replica_checks.h): N replicas with batch B train
// to the weights of one replica with batch N*B (1e-5 per tensor, fp32: TF32
// off), with one allreduce or buckets, with synchronised batch norm, and stay
// bit-identical. Exits 77 (skipped) when the strategy cannot start here (too
// few GPUs, no NCCL), saying why.
#include <gtest/gtest.h>

#include <cstdio>

#include "convoy/backends/devices.h"
#include "convoy/core/error.h"
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

// On this replica's GPU, in plain fp32, so that 1e-5 holds.
std::unique_ptr<Executable> compile_gpu(const nn::Model& model, const CompileOptions& options, uint64_t seed) {
  CompileOptions o = options;
  o.gpu.index = g_plain->gpu();
  o.gpu.tf32 = false;
  return compile_cuda(model, o, seed);
}

TEST(NcclReplicas, WithoutBatchNormTrainAsOneReplicaWithTheGlobalBatch) {
  testing::expect_equivalent(plain_net(), *g_plain, false, compile_gpu);
}

TEST(NcclReplicas, GradientBucketsDuringBackwardGiveTheSameWeights) {
  testing::expect_equivalent(plain_net(), *g_bucketed, false, compile_gpu);
}

TEST(NcclReplicas, WithSynchronisedBatchNormTrainAsOneReplicaWithTheGlobalBatch) {
  testing::expect_equivalent(bn_net(), *g_bucketed, true, compile_gpu);
}

TEST(NcclReplicas, PerReplicaBatchNormDiffersFromTheGlobalBatch) {
  const Trained one = testing::train_model(bn_net(), kBatch * g_plain->world_size(), nullptr, false, compile_gpu);
  const Trained many = testing::train_model(bn_net(), kBatch, g_plain, false, compile_gpu);
  EXPECT_GT(testing::relative_error(many.params, one.params), 1e-4);
  EXPECT_TRUE(same_on_every_replica(*g_plain, many.params));
  EXPECT_TRUE(same_on_every_replica(*g_plain, many.state)) << "running statistics are averaged each epoch";
}

// With every GPU visible to every process, as tests/nccl_replicas.sh runs it.
TEST(NcclReplicas, EachReplicaTrainsOnItsOwnGpu) {
  auto exe = compile_gpu(plain_net(), {.batch_size = kBatch}, 7);
  const std::string& device = exe->compiled_for().device;
  EXPECT_EQ(device.rfind("cuda:" + std::to_string(g_plain->gpu()), 0), 0u) << device;
  int64_t gpus_used = int64_t{1} << g_plain->gpu();
  g_plain->allreduce_sum(std::span<int64_t>(&gpus_used, 1));  // distinct GPUs: distinct bits (one host)
  EXPECT_EQ(__builtin_popcountll(static_cast<unsigned long long>(gpus_used)), g_plain->world_size());
}

}  // namespace
}  // namespace convoy

int main(int argc, char** argv) {
  using namespace convoy;
  ::testing::InitGoogleTest(&argc, argv);
  std::unique_ptr<dist::Strategy> plain, bucketed;
  try {  // the first initialises MPI and is destroyed last (it finalises)
    plain = dist::make_strategy({.name = "nccl", .timeout_seconds = 60});
    bucketed = dist::make_strategy({.name = "nccl", .timeout_seconds = 60, .bucket_kib = 1});
  } catch (const UserError& e) {
    std::fprintf(stderr, "skip: the nccl strategy cannot start here: %s\n", e.what());
    return 77;
  }
  g_plain = plain.get();
  g_bucketed = bucketed.get();
  if (plain->world_size() < 2) {
    std::fprintf(stderr, "convoy_nccl_mpi_tests: run under mpirun with 2 or more processes, one per GPU\n");
    return 1;
  }
  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (!plain->is_primary()) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new convoy::testing::FailurePrinter(plain->rank()));
  }
  int64_t failed = RUN_ALL_TESTS() != 0;
  plain->allreduce_sum(std::span<int64_t>(&failed, 1));
  return failed ? 1 : 0;
}
