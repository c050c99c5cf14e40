#pragma once
// The side of a compiled model that the training loop (train/fit), replicas
// (dist/), checkpoints, benchmarks and tests reach through
// Executable::internals(): the flat buffers one by one, resuming mid-epoch,
// the numerical guard's report, profiling and the replicas' hooks. A model's
// user needs only executable.h.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/backends/replica_hooks.h"

namespace convoy {

// The flat buffers an executable holds, in the model's canonical order and
// layouts. Gradients, output and input gradient are of the last step, read only.
enum class Held {
  parameters,       // model.num_parameters()
  state,            // model.num_state(): BN running statistics
  optimizer_state,  // optim::state_size
  gradients,        // d loss / d parameters, as parameters
  output,           // model outputs [batch, classes]
  input_gradient,   // d loss / d input [batch, input...]: compile with input_gradient = true
};
// "parameters", "state", "optimizer state", "gradients", "output", "input gradient".
const char* held_name(Held held);
// For write(): std::invalid_argument unless `held` is parameters, state or
// optimizer state (the rest is computed, not set).
void require_writable(Held held);

class ExecutableInternals {
 public:
  virtual ~ExecutableInternals() = default;

  // Floats in `held`; copies out of it and (parameters, state and optimizer
  // state only) into it. A span of another size is a UserError.
  virtual int64_t size(Held held) const = 0;
  virtual void read(Held held, std::span<float> to) const = 0;
  virtual void write(Held held, std::span<const float> from) = 0;
  std::vector<float> copy_of(Held held) const;  // read into a new vector

  // Forward in training mode, loss and backward with no update and no metrics;
  // returns the mean loss. For gradient checks and parity tests.
  virtual double loss_and_gradients(const float* x, Targets y) = 0;
  // How many slices of each batch run side by side, one per thread, through
  // whole steps (Parallelism::batch_slices); 1: one step at a time.
  virtual int64_t batch_slices() const { return 1; }

  // Resuming mid-epoch. restore_metrics puts back the running sums a
  // checkpoint saved, so the epoch's metrics continue exactly (same
  // additions, same order). set_steps_done says how many updates were
  // applied before, so that what depends on the step count (dropout masks)
  // continues as if never stopped; backends with nothing step-dependent ignore it.
  virtual void restore_metrics(const Metrics& m) = 0;
  virtual void set_steps_done(int64_t steps) { (void)steps; }

  // After a step that was not finite (Executable::last_step_finite): where
  // non-finite values first showed, scanning that step's buffers in the
  // order they were computed — the input batch, each layer's output in layer
  // order, the loss, then gradients from the last layer back — e.g. "the
  // forward output of conv2d_0". Only this scan is per layer; call it before
  // the next step.
  virtual std::string nonfinite_report() const = 0;

  // Per-layer timing of training steps; off by default (it adds a clock read
  // around every op). profile() returns the sums since profiling was turned on.
  virtual void set_profiling(bool on) = 0;
  virtual std::vector<LayerProfile> profile() const = 0;
  virtual int64_t profiled_steps() const = 0;

  // Data parallelism (dist/, see replica_hooks.h). Off by default; the
  // reducer must outlive the executable or be unset. A backend that cannot
  // take part throws UserError rather than train replicas apart.
  virtual void set_gradient_reducer(GradientReducer* reducer) = 0;
  virtual void set_batch_norm_reducer(StatisticsReducer reducer) = 0;
};

}  // namespace convoy
