// The nccl strategy: one replica per GPU, one process each, started by
// mpirun. MPI starts the group (rank 0's NCCL id is broadcast over it) and
// carries the host's collectives: the starting weights, metric sums, stop
// votes and BN running-statistics averages — the MPI strategy's own code,
// watched the same way. NCCL (dist/nccl.h) carries what lives on the GPUs:
// the gradients, averaged in the executable's stream (ncclAvg), and the
// synchronised batch-norm statistics. Each replica trains on the GPU of its
// rank among the replicas of its host (or on the one GPU it sees).
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "convoy/backends/devices.h"
#include "convoy/core/error.h"
#include "convoy/dist/nccl.h"
#include "convoy/dist/watchdog.h"
#include "dist/mpi_strategy.h"
#include "dist/nccl_strategy.h"

namespace convoy::dist {
namespace {

class NcclStrategy final : public Strategy {
 public:
  NcclStrategy(std::unique_ptr<Strategy> host, std::unique_ptr<NcclGroup> group, int gpu)
      : host_(std::move(host)), group_(std::move(group)), gpu_(gpu) {}

  std::string name() const override { return "nccl"; }
  int rank() const override { return host_->rank(); }
  int world_size() const override { return host_->world_size(); }
  int gpu() const override { return gpu_; }
  void allreduce_mean(std::span<float> v) override { host_->allreduce_mean(v); }
  void allreduce_sum(std::span<double> v) override { host_->allreduce_sum(v); }
  void allreduce_sum(std::span<int64_t> v) override { host_->allreduce_sum(v); }
  void broadcast(std::span<float> v) override { host_->broadcast(v); }
  void barrier() override { host_->barrier(); }
  GradientReducer* gradient_reducer() override { return group_ ? group_->gradient_reducer() : nullptr; }
  CommStats stats() const override {
    CommStats s = host_->stats();
    if (group_) {
      const CommStats g = group_->stats();
      s.collectives += g.collectives;
      s.bytes += g.bytes;
    }
    return s;
  }

 private:
  std::unique_ptr<Strategy> host_;   // MPI: destroyed last, so MPI_Finalize comes after NCCL's end
  std::unique_ptr<NcclGroup> group_;  // null for one replica
  int gpu_;                           // this replica's GPU
};

// This process's place among the processes on its host, as the launcher
// says before MPI starts (Open MPI, MPICH's Hydra, Slurm); 0 when none says.
int launcher_local_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var)) return std::max(0, std::atoi(v));
  return 0;
}

// This process's place among the replicas on its host, and their number.
std::pair<int, int> local_rank_and_size(int rank) {
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  return {local_rank, local_size};
}

}  // namespace

std::unique_ptr<Strategy> make_nccl_strategy(const StrategyOptions& o) {
  // What a machine lacks is said before MPI starts, in one line. The first
  // look at the GPUs already uses this replica's own (the launcher's local
  // rank): checking GPU 0 from every replica would put a CUDA context of
  // each on GPU 0.
  if (const std::string why = nccl_unavailable(); !why.empty()) throw UserError(why);
  const int guessed_gpu = launcher_local_rank();
  const GpuReport& gpus = find_gpus(guessed_gpu);
  require(!gpus.gpus.empty(), "--strategy nccl trains one replica per GPU, but there is no usable GPU (" +
                                  gpus.why_unusable + "); use --strategy mpi to train replicas on CPUs");

  std::unique_ptr<Strategy> host = make_mpi_strategy(o);
  const int rank = host->rank(), world = host->world_size();
  Watchdog watchdog(o.timeout_seconds, exit_on_timeout(rank, world));
  std::unique_ptr<NcclGroup> group;
  int gpu = guessed_gpu;
  {
    Watchdog::Guard guard(watchdog, "NCCL's start-up");
    const auto [local_rank, local_size] = local_rank_and_size(rank);
    const int visible = static_cast<int>(gpus.gpus.size());
    // One visible GPU each: a launcher (Slurm's --gpus-per-task) may have
    // given every process its own through CUDA_VISIBLE_DEVICES; if they
    // share one after all, NCCL refuses ("Duplicate GPU detected").
    require(local_size <= visible || visible == 1,
            "--strategy nccl: " + std::to_string(local_size) + " replicas on this host but " + std::to_string(visible) +
                " GPUs visible to them; NCCL takes one replica per GPU: start at most " + std::to_string(visible) +
                " per host (mpirun --map-by ppr:" + std::to_string(visible) + ":node), or check CUDA_VISIBLE_DEVICES");
    gpu = visible == 1 ? 0 : local_rank;  // differs from the guess: a launcher that did not say, or one GPU each
    const GpuReport& mine = find_gpus(gpu);
    require(mine.usable(), "--strategy nccl: replica " + std::to_string(rank) + " cannot train on GPU " +
                               std::to_string(gpu) + ": " + mine.why_unusable);
    if (world > 1) {
      NcclId id{};
      if (rank == 0) id = nccl_new_id();
      MPI_Bcast(id.data(), static_cast<int>(id.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
      group = std::make_unique<NcclGroup>(
          id, rank, world, gpu, NcclOptions{.timeout_seconds = o.timeout_seconds, .bucket_kib = o.bucket_kib});
    }
  }
  return std::make_unique<NcclStrategy>(std::move(host), std::move(group), gpu);
}

}  // namespace convoy::dist
