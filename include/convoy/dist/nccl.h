#pragma once
// Collectives on GPUs through NCCL: the device half of the nccl strategy
// (strategy.h). One replica per GPU; a group's gradient reducer averages a
// CUDA executable's gradients on the device, in the executable's stream (in
// buckets during backward, or once after it), and sums synchronised
// batch-norm statistics the same way. The host never waits for these
// collectives; a watcher thread polls the GPU's progress and NCCL's
// asynchronous errors, and stops the process (exit kFailedReplicaExitCode,
// one line on stderr) when a peer died or a collective outlasts the timeout.
//
// Built when CMake finds NCCL with the CUDA backend (CONVOY_NCCL); the
// library itself (libnccl.so.2) is loaded when first needed, so convoy starts
// on a machine without it. The nccl strategy adds MPI to start the replicas
// (rank 0's NCCL id is broadcast over MPI) and for the host's collectives.
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "convoy/backends/replica_hooks.h"
#include "convoy/dist/strategy.h"

namespace convoy::dist {

// Empty when this build has NCCL and the library loads; else one line saying
// why not and what to install.
std::string nccl_unavailable();

// NCCL's unique id (ncclUniqueId): made by one replica, handed to all. The
// process that made it serves the group's start-up, so it must live until
// every replica has joined.
using NcclId = std::array<char, 128>;
NcclId nccl_new_id();

struct NcclOptions {
  double timeout_seconds = 60;  // how long a collective may wait for the other replicas
  int64_t bucket_kib = 16;      // gradient buckets of at least this many KiB during backward; 0: one after it
};

class NcclGroup {
 public:
  // Joins the group of `world` replicas as `rank`, on CUDA device `gpu`
  // (which must differ from the other replicas' on this host: NCCL takes one
  // replica per GPU). Every replica calls it; it returns once all have.
  // Throws UserError when NCCL is unavailable or cannot start.
  NcclGroup(const NcclId& id, int rank, int world, int gpu, const NcclOptions& options);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int rank() const;
  int world_size() const;
  int gpu() const;
  // For ExecutableInternals::set_gradient_reducer of a CUDA executable on gpu(); it
  // also serves that executable's synchronised batch norm.
  GradientReducer* gradient_reducer();
  // Collectives and bytes as enqueued: the replays of a captured CUDA graph
  // are not seen (the host never blocks in them, so no wait time either).
  CommStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace convoy::dist
