#pragma once
// A device: what a backend provides so that the device-neutral Program
// (program.h) can run a compiled model on it. The Program owns the training
// step (binding, memory plan, gradient sums, reducers, metrics, the numerical
// guard, profiling, captured steps); a device owns memory, copies, one op per
// layer and a handful of kernels.
//
// Stream semantics: every call that takes device pointers only *enqueues*
// work, run in the order enqueued (a CPU device simply runs it at once).
// Only to_host() and mark_seconds() wait for the work before them. So the
// Program never makes a host decision inside a step: what depends on a
// step's result (the guard's verdict, the metrics) lives in DeviceScalars
// (device_scalars.h) and is decided by the device's kernels.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/device_scalars.h"
#include "backends/op.h"
#include "convoy/backends/executable.h"
#include "convoy/nn/model.h"

namespace convoy {

// memcpy/memset for host memory that may be empty: an empty buffer's pointer
// may be null, which memcpy must never see, even for 0 bytes.
inline void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}
inline void zero_bytes(void* dst, std::size_t bytes) {
  if (bytes) std::memset(dst, 0, bytes);
}

// Device memory the Program asks for at compile time.
struct Region {
  const char* what = "";
  std::size_t bytes = 0;
};

// One batch's place in the device's input banks (device memory).
struct Slot {
  const float* x = nullptr;
  const int32_t* labels = nullptr;  // set for class-index targets
  const float* dense = nullptr;     // set for target rows
};

// A loss kernel's arguments: the model's output against a slot's targets,
// as the CPU's loss_forward (backends/cpu/softmax_kernels.h). d_out, when
// set, receives d(mean loss)/d(out) over grad_rows rows. Sinks in device
// memory, each optional: step_loss (overwritten), loss_sum and correct
// (added to). With replicas, rows counts the whole batch's (replica r's are
// those of its part) and each replica's d_out is of the mean over its own.
struct LossCall {
  Loss loss = Loss::nll;
  float smoothing = 0;
  const float* out = nullptr;
  Slot targets;
  int64_t rows = 0, cols = 0, grad_rows = 0;
  float* d_out = nullptr;
  double* step_loss = nullptr;
  double* loss_sum = nullptr;
  unsigned long long* correct = nullptr;
};

// What a device stages and runs: fixed at compile time.
struct DeviceShape {
  int64_t batch = 0;    // rows one replica computes (the whole batch / replicas())
  Shape input;          // one example, without the batch
  int64_t classes = 0;  // floats per target row
  int64_t slots = 1;    // batches per bank (steps one call may run)
};

// Training steps captured once and replayed (a CUDA graph; XLA's compiled
// loop would be one too).
class CapturedSteps {
 public:
  virtual ~CapturedSteps() = default;
};

// Replicas inside one device (PJRT's num_replicas): replicas() copies of
// one program run at once, each on its own rows of every batch (replica r
// on rows [r * b, (r + 1) * b) of a batch of replicas() * b). Every pointer
// names the same range on each replica; the Program's calls are the same for
// all (SPMD) and speak of the whole batch (rows, counts), which the device
// splits. Loss sinks receive sums over all replicas, and the gradient
// reducer the device accepts keeps the replicas' copies identical.
class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  virtual int replicas() const { return 1; }
  // How many batches one train_steps call should take (1: hand them one by one).
  virtual int64_t steps_per_call(const CompileOptions& options) const = 0;

  // --- compile time, in this order
  // One op per layer (seeds[i]: layer i's own, for dropout).
  virtual void make_ops(const nn::Model& model, const DeviceShape& shape, const std::vector<uint64_t>& seeds) = 0;
  virtual bool is_view(std::size_t layer) const = 0;
  // The layer whose op does this layer's work (the device fused them: this
  // layer's own passes do nothing and its time is in that layer's), or -1.
  virtual int runs_in(std::size_t layer) const {
    (void)layer;
    return -1;
  }
  // Buffers start at multiples of this many floats.
  virtual int64_t align_floats() const = 0;
  // The Program's regions, each zeroed, plus whatever the device needs for
  // itself (input banks, the ops' own memory); one pointer per region asked.
  virtual std::vector<void*> allocate(const std::vector<Region>& regions) = 0;
  // The edges the device copies through: the first layer's input and, when
  // wanted, the gradient with respect to it.
  virtual void bind_edges(float* input, float* d_input) = 0;
  // The device adds its own fields (scratchpad, own, discard, reducers).
  virtual void bind(std::size_t layer, OpBuffers buffers) = 0;
  // Every op is bound: surface any error of the compile-time work now.
  virtual void finish_compile() {}

  // --- copies
  // Returns once `src` may be reused (the copy may wait for earlier work).
  virtual void to_device(void* dst, const void* src, std::size_t bytes) = 0;
  // Waits for the work enqueued before it, then copies (replica 0's).
  virtual void to_host(void* dst, const void* src, std::size_t bytes) const = 0;
  // Every replica's [src, src + bytes), one after the other (their rows of
  // the model's output).
  virtual void replicas_to_host(void* dst, const void* src, std::size_t bytes) const { to_host(dst, src, bytes); }
  virtual void zero(void* dst, std::size_t bytes) = 0;
  // True when none of n values is NaN or infinite, on any replica (after a fault only).
  virtual bool all_finite(const float* values, int64_t n) const = 0;

  // --- feeding
  // Copies n batches of `rows` examples (and their targets) into the next
  // bank; the work enqueued after it sees them. Returns the bank.
  virtual int stage(const float* x, Targets y, int64_t n, int64_t rows) = 0;
  virtual Slot slot(int bank, int64_t i) const = 0;
  // The work reading `bank` is enqueued: it may be refilled once that ran.
  virtual void release(int bank) = 0;
  // The first layer's input from a slot: `rows` examples, the rest zero.
  virtual void load_input(const float* x, int64_t rows) = 0;
  // The input gradient in the callers' layout (NCHW).
  virtual void read_input_gradient(std::span<float> out) const = 0;

  // --- one step
  virtual void forward(std::size_t layer, bool training) = 0;
  virtual void backward(std::size_t layer) = 0;
  virtual void loss(const LossCall& call) = 0;
  // into = sum of parts (at least two), n floats each.
  virtual void sum(float* into, const std::vector<const float*>& parts, int64_t n) = 0;
  // The numerical guard around a training step: begin saves the BN state
  // and clears the step's sums; finish flags non-finite gradients, decides
  // (commit_guarded_step) and puts the state back after a faulty step.
  virtual void begin_guarded_step(float* state, float* state_before, int64_t state_n, DeviceScalars* s) = 0;
  virtual void finish_guarded_step(const float* grads, int64_t n, float* state, const float* state_before,
                                   int64_t state_n, int64_t batch, DeviceScalars* s) = 0;
  // optim::step over n parameters with the learning rate s->lr, only when
  // s->step_ok.
  virtual void optimizer_step(const optim::OptimizerOptions& opt, float* params, float* grads, float* state,
                              int64_t n, DeviceScalars* s) = 0;
  // Frozen layers: the trainable runs packed. runs holds `count` flat starts
  // then `count` packed starts (device memory); packed_n floats in all.
  virtual void gather_runs(const float* flat, float* packed, const int64_t* runs, int64_t count,
                           int64_t packed_n) = 0;
  virtual void scatter_runs(const float* packed, float* flat, const int64_t* runs, int64_t count,
                            int64_t packed_n) = 0;

  // --- profiling: timestamps in stream order
  virtual void prepare_marks(std::size_t count) = 0;
  virtual void mark(std::size_t k) = 0;
  // Waits for mark `count - 1`; seconds from mark k to mark k + 1, for each k.
  // Empty: the device cannot time layers (one fused module runs the step).
  virtual std::vector<double> mark_seconds() = 0;

  // --- captured steps (optional)
  virtual bool can_capture() const { return false; }
  virtual void begin_capture() {}
  // Ends the capture. keep = false: the capture is abandoned (an exception
  // came), whatever it holds is dropped and null returned. Throws when the
  // capture failed.
  virtual std::unique_ptr<CapturedSteps> end_capture(bool keep) {
    (void)keep;
    return nullptr;
  }
  virtual void launch(CapturedSteps& steps) { (void)steps; }
  // None of the captured steps may still run (before they are destroyed).
  virtual void synchronize() {}

  // --- replicas (replica_hooks.h)
  // Checks that this device can train with `reducer` (null: unset) and binds
  // it; throws UserError saying why not.
  virtual void accept_gradient_reducer(GradientReducer* reducer) = 0;
  virtual void set_batch_norm_reducer(StatisticsReducer reducer, GradientReducer* gradient_reducer) = 0;
};

}  // namespace convoy
