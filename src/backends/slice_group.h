#pragma once
// What the threads of batch slices (batch_slices.h) share inside a step: a
// barrier, and the two replica hooks (replica_hooks.h) that make K slices of
// one batch train as that batch. Each slice runs on its own thread; every
// reducer call is a rendezvous of all K, in the same order on each (the step
// is the same program on every slice).
//   gradients: the slices' gradient buffers become their mean, summed in
//     slice order (element i by one thread, whichever: the bits do not depend
//     on it), so every slice updates its copy of the weights alike;
//   batch-norm statistics: the per-channel sums become their sum over the
//     slices, in slice order, so batch norm sees the whole batch. One
//     rendezvous per call, not two: each slice stages its sums in one of two
//     buffers by the call's parity, so the next call overwrites the other
//     (the call after that, this one's again, comes only after a rendezvous
//     every slice reaches once it has read this call's).
// An outer reducer (MPI replicas, each a process of K slices) then runs on
// slice 0's thread, OpenMP's master thread, and its result is copied to all.
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "convoy/backends/replica_hooks.h"

namespace convoy {

// Thrown at a barrier on the threads of a step another slice's thread left
// with an exception (that exception is the one reported).
struct SliceAborted {};

// Waits for K threads. A waiter spins for a few microseconds (on a quiet
// machine the others arrive within that, and parking would cost a futex
// round trip of about as much), then parks on the generation word (futex)
// until the last party arrives. Parking matters when the threads outnumber
// the free cores: a spinning waiter would hold the core that the party it
// waits for needs (2 slices on 2 cores with two busy processes: 9.6 s an
// epoch spinning, docs/benchmarks.md).
class SliceBarrier {
 public:
  explicit SliceBarrier(int parties) : parties_(parties) {}
  void wait();
  // Every wait() from now on throws SliceAborted, until reset(); parked
  // waiters are woken to throw.
  void abort();
  // Called while no thread waits (between steps): clears an abort and the
  // count of parties an aborted wait left behind.
  void reset();

 private:
  // Returns once generation_ differs from `seen`.
  void await_generation(uint32_t seen);

  const int parties_;
  std::atomic<int> waiting_{0};
  std::atomic<uint32_t> generation_{0};  // 32 bits: the futex word
  std::atomic<int> parked_{0};           // waiters that may be asleep: the last one wakes them only then
  std::atomic<bool> aborted_{false};
};

class SliceGroup {
 public:
  explicit SliceGroup(int slices);
  int slices() const { return slices_; }
  SliceBarrier& barrier() { return barrier_; }
  // Called while no thread is inside the group (between steps): clears the
  // barrier's abort, and the staging parities, which a step that ended in an
  // exception may have left unequal across the slices.
  void reset();
  // Slice k's hooks, to bind to its Program; they live as long as the group.
  GradientReducer* gradient_reducer(int k) { return reducers_[static_cast<std::size_t>(k)].get(); }
  StatisticsReducer statistics_reducer(int k);
  // Reducers over processes (dist/), applied after the slices' own; null/empty: none.
  void set_outer(GradientReducer* outer) { outer_ = outer; }
  void set_outer_statistics(StatisticsReducer outer) { outer_statistics_ = std::move(outer); }

  void mean_of_gradients(int k, std::span<float> gradients);
  void sum_of_statistics(int k, std::span<double> sums);

 private:
  // After slice 0's buffer holds the result: every other slice copies it.
  template <class T> void share_from_first(int k, std::span<T> mine, const std::vector<T*>& all);

  int slices_;
  SliceBarrier barrier_;
  std::vector<std::unique_ptr<GradientReducer>> reducers_;
  // Slice k's copies of its batch-norm sums, by call parity. Each on its own
  // cache lines: `next` changes every call.
  struct alignas(64) Staged {
    std::vector<double> sums[2];
    int next = 0;
  };

  std::vector<float*> gradients_;       // per slice, this step's buffer
  std::vector<double*> statistics_;     // per slice, this call's sums (for the outer reducer's share)
  std::vector<Staged> staged_;          // per slice
  GradientReducer* outer_ = nullptr;
  StatisticsReducer outer_statistics_;
};

}  // namespace convoy
