// The strategy factory and the one-replica strategy.
#include "convoy/dist/strategy.h"

#include <algorithm>
#include <cstdlib>

#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#ifdef CONVOY_HAVE_MPI
#include "dist/mpi_strategy.h"
#endif

namespace convoy::dist {
namespace {

// One replica: every collective is the identity.
class SingleStrategy final : public Strategy {
 public:
  std::string name() const override { return "single"; }
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void allreduce_mean(std::span<float>) override {}
  void allreduce_sum(std::span<double>) override {}
  void allreduce_sum(std::span<int64_t>) override {}
  void broadcast(std::span<float>) override {}
  void barrier() override {}
  GradientReducer* gradient_reducer() override { return nullptr; }
  CommStats stats() const override { return {}; }
};

}  // namespace

Strategy& single() {
  static SingleStrategy s;
  return s;
}

bool mpi_available() {
#ifdef CONVOY_HAVE_MPI
  return true;
#else
  return false;
#endif
}

int launched_processes() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var)) return std::max(1, std::atoi(v));
  return 1;
}

int default_threads_per_process() {
  int local = 1;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(var)) {
      local = std::max(1, std::atoi(v));
      break;
    }
  return std::max(1, hardware_threads() / local);
}

std::unique_ptr<Strategy> make_strategy(const StrategyOptions& o) {
  require(o.timeout_seconds > 0, "distributed.timeout_seconds (--dist-timeout) must be positive");
  require(o.bucket_kib >= 0, "distributed.bucket_kib (--dist-bucket-kib) must be 0 (off) or positive");
  if (o.name == "single") {
    const int n = launched_processes();
    require(n == 1, "this process is one of " + std::to_string(n) +
                        " started by a launcher (mpirun), but the strategy is single: each would train alone; pass "
                        "--strategy mpi (or distributed.strategy: mpi)");
    return std::make_unique<SingleStrategy>();
  }
  if (o.name == "mpi") {
#ifdef CONVOY_HAVE_MPI
    return make_mpi_strategy(o);
#else
    throw UserError("this convoy was built without MPI; install Open MPI (libopenmpi-dev) and rebuild to use --strategy mpi");
#endif
  }
  require(o.name != "nccl", "strategy nccl needs the CUDA backend, which this build lacks; use --strategy mpi");
  throw UserError("distributed.strategy (--strategy): unknown strategy '" + o.name + "'; use single or mpi");
}

}  // namespace convoy::dist
