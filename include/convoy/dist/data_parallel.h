#pragma once
// Data-parallel training with the semantics of PyTorch's DistributedSampler +
// DDP (and the seed article's 8-core run): every replica draws the same
// shuffled order of an epoch (shared seed), keeps the first
// floor(N / replicas) * replicas positions and takes every replicas-th one
// from its rank on, so the shards are disjoint and equally long and all
// replicas run the same number of steps. With batch B per replica, step k of
// the replicas together sees exactly the examples of step k of one replica
// with batch B * replicas: averaged gradients make the two runs the same.
#include <cstdint>

#include "convoy/backends/executable.h"
#include "convoy/data/dataset.h"
#include "convoy/data/labeled_images.h"
#include "convoy/dist/strategy.h"

namespace convoy::dist {

// Makes `exe` one replica of `s`: rank 0's parameters, BN statistics and
// optimizer state copied to all (a resumed or seeded start is the same
// everywhere), gradients averaged in every step, and with sync_batch_norm
// batch statistics over all replicas' batches. `s` must outlive `exe`.
void attach(Strategy& s, Executable& exe, bool sync_batch_norm);

// Examples each replica trains on per epoch.
int64_t shard_size(int64_t examples, const Strategy& s);
// This replica's shard of an epoch's `order` of `examples` positions.
data::Dataset shard(const data::Dataset& order, int64_t examples, const Strategy& s);

// The contiguous slice of an evaluation set this replica evaluates (all of it,
// without a copy, for one replica); sum the metrics over replicas.
class EvalShard {
 public:
  EvalShard(const data::LabeledImages& all, const Strategy& s);
  const data::LabeledImages& data() const { return view_ ? *view_ : own_; }

 private:
  data::LabeledImages own_;
  const data::LabeledImages* view_ = nullptr;
};

// Sums over replicas (every replica gets the result).
Metrics sum(Strategy& s, const Metrics& m);
// True on every replica when it is true on any (agreeing to stop together).
bool any(Strategy& s, bool flag);
// Makes the BN running statistics the mean over replicas, so that every
// replica evaluates and saves the same model (with per-replica BN they drift
// apart; with synchronised BN they are already equal).
void average_state(Strategy& s, Executable& exe);

}  // namespace convoy::dist
