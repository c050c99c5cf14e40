#pragma once
// The two places where data-parallel training (dist/) reaches into a training
// step. A backend calls them; dist/ implements them with MPI (or, later,
// NCCL). Neither is set for one replica, and then a step costs nothing extra.
#include <functional>
#include <span>

namespace convoy {

// Turns each replica's gradients into the mean over all replicas before the
// optimizer update sees them.
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // During backward, once a layer has written its parameter gradients (the
  // last layer first): its slice of the flat gradient buffer, final until the
  // update. Lets the reducer start communicating while earlier layers still
  // compute (overlap); it may also ignore these calls.
  virtual void ready(std::span<float> layer_gradients) {}
  // After backward, before the update: the whole flat gradient buffer. Returns
  // once it holds the mean over replicas, the same bits on every replica.
  virtual void finish(std::span<float> gradients) = 0;
  // The ready() calls since the last finish() belong to a step that will
  // never run (a capture of steps that failed half-way, see
  // backends/program.h): forget them, so the next step starts clean.
  virtual void abandon_step() {}
};

// Synchronised batch norm: replaces per-channel partial sums (and a trailing
// row count) of this replica's batch, in place, with their sums over all
// replicas, so every replica normalises with the global batch's statistics.
using StatisticsReducer = std::function<void(std::span<double> sums)>;

}  // namespace convoy
