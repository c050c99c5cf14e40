#pragma once
// Distribution strategies: how many replicas train one model and how they
// agree. Each replica is one process with its own copy of the model; at every
// step the replicas average their gradients, so their weights stay identical.
//
//   single — one replica, no communication (convoy's default).
//   mpi    — one replica per MPI process (`mpirun -np N convoy train
//            --strategy mpi`); collectives are Open MPI's, on the CPU.
//
// Collectives are blocking and must be called by every replica in the same
// order. Each one is watched: when the other replicas do not arrive within
// the timeout (a worker died or hangs), the process prints one line naming
// its rank and what it waited for, and exits with kFailedReplicaExitCode.
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "convoy/backends/replica_hooks.h"

namespace convoy::dist {

inline constexpr int kFailedReplicaExitCode = 3;

struct StrategyOptions {
  std::string name = "single";  // single, mpi
  double timeout_seconds = 60;  // how long a collective may wait for the others
  // Gradients travel in buckets of at least this many KiB, each sent as soon
  // as backward has produced it (overlapping the rest of backward); 0: one
  // allreduce of all gradients after backward.
  int64_t bucket_kib = 0;
};

// Bytes moved and time spent blocked in collectives, for reports.
struct CommStats {
  int64_t collectives = 0;
  double bytes = 0;
  double wait_seconds = 0;  // blocked in a collective or waiting for one to finish
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string name() const = 0;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  bool is_primary() const { return rank() == 0; }  // the replica that prints and writes files
  // The CUDA GPU this replica trains on (CompileOptions::Gpu::index): its
  // own under nccl, one replica per GPU; 0 for the others.
  virtual int gpu() const { return 0; }

  // In place: every replica ends with the element-wise mean (sum) over replicas.
  virtual void allreduce_mean(std::span<float> values) = 0;
  virtual void allreduce_sum(std::span<double> values) = 0;
  virtual void allreduce_sum(std::span<int64_t> values) = 0;
  // In place: every replica ends with rank 0's values.
  virtual void broadcast(std::span<float> values) = 0;
  virtual void barrier() = 0;

  // Averages a training step's gradients (see replica_hooks.h); nullptr when
  // there is nothing to average (one replica).
  virtual GradientReducer* gradient_reducer() = 0;
  virtual CommStats stats() const = 0;
};

// The strategy `options.name` names; throws UserError for an unknown name,
// for "mpi" in a build without MPI, and for "single" in a process that a
// launcher started as one of several (each would train alone, all writing the
// same files). An MPI strategy initialises MPI once per
// process and finalises it when destroyed (not while an exception unwinds:
// then the process exits and mpirun stops the others).
std::unique_ptr<Strategy> make_strategy(const StrategyOptions& options);

// The one-replica strategy, shared (it has no state).
Strategy& single();

// True when this build has the MPI strategy.
bool mpi_available();

// How many processes the launcher (mpirun, srun) started in this job, from
// its environment; 1 when not launched by one.
int launched_processes();

// Worker threads for "all cores" (--threads 0): the cores shared among the
// processes the launcher started on this host, so replicas do not
// oversubscribe them.
int default_threads_per_process();

}  // namespace convoy::dist
