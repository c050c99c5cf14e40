#pragma once
// The scalars of a compiled program that live in device memory, so that work
// already enqueued (or captured into a CUDA graph) reads their current
// values: the metrics, the learning rate, the numerical guard's verdicts and
// the count of applied steps. Every device keeps them in this one layout;
// the Program (program.h) reads and writes them only through the device's
// copies. Plain C++ and no convoy headers: nvcc compiles this too.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define CONVOY_HOST_DEVICE __host__ __device__
#else
#define CONVOY_HOST_DEVICE
#endif

namespace convoy {

// Blocks of the first pass of the global gradient norm (clip_norm, CUDA).
inline constexpr int kNormBlocks = 128;

struct DeviceScalars {
  double loss_sum;              // metrics: sum of per-example losses
  unsigned long long correct;   // metrics: examples predicted right
  double step_loss;             // the last loss_and_gradients step's loss sum
  float lr;                     // the optimizer's current learning rate
  float clip_scale;             // this step's gradient scale (clip_norm)
  float adam_c1, adam_c2;       // this step's Adam bias corrections
  double norm_partials[kNormBlocks];
  // The numerical guard: this step's loss and correct count before they
  // join the metrics, its verdict, and the execution's fault state.
  double step_loss_sum;
  unsigned long long step_correct;
  unsigned long long train_examples;  // metrics: examples of committed training steps
  int nonfinite;  // this step: some gradient is NaN or Inf
  int step_ok;    // this step may update (the optimizer reads it)
  int halted;     // a step of this execution was not finite: later ones change nothing
  int steps_run;  // steps of this execution run, up to and including a faulty one
  // Training steps applied so far (committed by the guard): dropout draws
  // its masks from it.
  int64_t steps_done;
};

// The guard's decision after a step's backward pass, written once for every
// device (the CUDA kernel runs it on one thread):
//   finite and no earlier fault in this execution: commit the step's metrics,
//     count it in steps_done, step_ok = 1 (the optimizer runs);
//   otherwise step_ok = 0 (the optimizer does nothing, the BN state is put
//     back); the first faulty step also sets `halted`, which keeps every later
//     step of the execution from changing anything, so the host can hand
//     those batches in again or stop with the last good weights.
CONVOY_HOST_DEVICE inline void commit_guarded_step(DeviceScalars* s, int64_t batch) {
#if defined(__CUDA_ARCH__)
  const bool finite = s->nonfinite == 0 && isfinite(s->step_loss_sum);
#else
  const bool finite = s->nonfinite == 0 && std::isfinite(s->step_loss_sum);
#endif
  if (s->halted || !finite) {
    s->step_ok = 0;
    if (!s->halted) {
      s->halted = 1;
      s->steps_run += 1;  // the faulty step counts as run
    }
    return;
  }
  s->step_ok = 1;
  s->steps_run += 1;
  s->steps_done += 1;  // dropout's next mask
  s->loss_sum += s->step_loss_sum;
  s->correct += s->step_correct;
  s->train_examples += static_cast<unsigned long long>(batch);
}

// The start of a guarded step: its own sums cleared.
CONVOY_HOST_DEVICE inline void begin_guarded_step(DeviceScalars* s) {
  s->step_loss_sum = 0;
  s->step_correct = 0;
  s->nonfinite = 0;
}

}  // namespace convoy
