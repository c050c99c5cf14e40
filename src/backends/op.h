#pragma once
// One layer's kernels on a device: the contract every backend's ops share.
// An op is built once per compiled model for the fixed batch; bind() wires
// it to memory the Program planned (graph_plan.h) and picks what depends on
// the real buffers; forward() and backward() only run (CPU) or enqueue
// (GPU) work. `Context` is the device's per-model state the op runs with
// (the CPU's oneDNN engine and stream, the GPU's stream and library handles).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "convoy/backends/replica_hooks.h"

namespace convoy {

struct OpBuffers {
  const float* src = nullptr;  // = srcs[0]
  float* dst = nullptr;
  const float* diff_dst = nullptr;
  float* diff_src = nullptr;  // = diff_srcs[0]; null: the input's gradient is not needed
  float* params = nullptr;    // this layer's slice of the flat parameter buffer
  float* grads = nullptr;     // ... of the flat gradient buffer
  float* state = nullptr;     // ... of the flat state buffer (running statistics)
  // Joins (add, concat) read every input: srcs[k] / diff_srcs[k] for input k.
  // A null diff_srcs[k]: that input needs no gradient.
  std::vector<const float*> srcs;
  std::vector<float*> diff_srcs;
  // Device memory: training steps applied so far (DeviceScalars::steps_done),
  // from which dropout draws its masks.
  const int64_t* steps_done = nullptr;
  // Dropout: this batch is examples [first_example, first_example + batch)
  // of a batch of mask_batch (0: of itself), whose masks it draws (a slice of
  // the batch, backends/batch_slices.h, drops what the whole batch would).
  int64_t first_example = 0, mask_batch = 0;
  // Filled in by the device, not the Program:
  void* scratchpad = nullptr;  // scratchpad_bytes(), shared by every op (they run one at a time)
  void* own = nullptr;         // private_bytes() for this op alone
  float* discard = nullptr;    // room for any activation: an input gradient nobody reads
  // Synchronised batch norm on a host device: sums statistics over replicas
  // when set (replica_hooks.h).
  const StatisticsReducer* reduce_statistics = nullptr;
};

template <class Context>
class Op {
 public:
  virtual ~Op() = default;
  // True when the output is the input reinterpreted (Flatten): no memory, no work.
  virtual bool is_view() const { return false; }
  virtual std::size_t scratchpad_bytes() const { return 0; }
  virtual std::size_t private_bytes() const { return 0; }
  virtual void bind(Context& ctx, const OpBuffers& buffers) = 0;
  virtual void forward(Context& ctx, bool training) = 0;
  // Writes (overwrites) this layer's parameter gradients and, when bound, diff_src.
  virtual void backward(Context& ctx) = 0;
  // What runs each pass, after bind(), for tests and diagnostics; empty where
  // an op has nothing to tell (CPU: WeightedOp names oneDNN's implementations).
  virtual std::string kernels() const { return {}; }
};

}  // namespace convoy
