#pragma once
// One layer's kernels on the CPU. An op is built once per compiled model: the
// constructor describes and creates its primitives for the fixed batch, bind()
// wires them to planned memory, and forward()/backward() only execute.
#include <cstddef>
#include <memory>
#include <vector>

#include "backends/cpu/dnnl_env.h"
#include "convoy/backends/replica_hooks.h"
#include "convoy/nn/layers.h"

namespace convoy::cpu {

struct OpBuffers {
  const float* src = nullptr;
  float* dst = nullptr;
  const float* diff_dst = nullptr;
  float* diff_src = nullptr;  // null: the gradient w.r.t. the input is not needed
  float* params = nullptr;    // this layer's slice of the flat parameter buffer
  float* grads = nullptr;     // ... of the flat gradient buffer
  float* state = nullptr;     // ... of the flat state buffer (running statistics)
  void* scratchpad = nullptr;
  // Joins (add, concat) read every input: srcs[k] / diff_srcs[k] for input k
  // (srcs[0] == src). A null diff_srcs[k]: that input needs no gradient.
  std::vector<const float*> srcs;
  std::vector<float*> diff_srcs;
  // Synchronised batch norm: sums statistics over replicas when set (see replica_hooks.h).
  const StatisticsReducer* reduce_statistics = nullptr;
};

class CpuOp {
 public:
  virtual ~CpuOp() = default;
  virtual std::size_t scratchpad_bytes() const { return 0; }
  // True when the output is the input reinterpreted (Flatten): no memory, no work.
  virtual bool is_view() const { return false; }
  virtual void bind(DnnlEnv& env, const OpBuffers& buffers) = 0;
  virtual void forward(DnnlEnv& env, bool training) = 0;
  // Writes this layer's parameter gradients and, when bound, diff_src.
  virtual void backward(DnnlEnv& env) = 0;
  // After each training step's update (dropout draws a new mask).
  virtual void next_step() {}
  // How many updates came before (a resumed run): dropout's masks continue.
  virtual void set_step(int64_t steps) { (void)steps; }
};

// seed: this layer's own (dropout masks).
std::unique_ptr<CpuOp> make_cpu_op(DnnlEnv& env, const nn::LayerPlan& plan, int64_t batch, uint64_t seed);

// Input/output shapes of a layer with the batch dimension in front.
Shape with_batch(int64_t batch, const Shape& shape);

}  // namespace convoy::cpu
