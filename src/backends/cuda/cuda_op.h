#pragma once
// One layer's kernels on a CUDA GPU, built once per compiled model: the
// constructor describes the layer for the fixed batch (cuDNN descriptors),
// bind() wires it to planned device memory and picks algorithms, and
// forward()/backward() only enqueue work on the context's stream. Activations
// are NCHW (images) or [N, features], the layouts callers use, so Flatten is
// a view and no reorder happens anywhere.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "convoy/nn/layers.h"

namespace convoy {
class DeviceGradientReducer;
}

namespace convoy::cuda {

// What every op runs with: one stream, the library handles bound to it, and
// one workspace shared by cuDNN and cuBLAS (safe: everything runs in order
// on the one stream).
struct CudaContext {
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasHandle_t cublas = nullptr;
  bool tf32 = true;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  // Synchronised batch norm (replicas under the nccl strategy): training-mode
  // BN statistics are summed over replicas through this; null: per replica.
  DeviceGradientReducer* sync_batch_norm = nullptr;
};

struct OpBuffers {
  const float* src = nullptr;  // = srcs[0]
  float* dst = nullptr;
  const float* diff_dst = nullptr;
  float* diff_src = nullptr;  // = diff_srcs[0]; null: the input's gradient is not needed
  float* params = nullptr;    // the flat parameter buffer (use the layer's slot offsets)
  float* grads = nullptr;     // the flat gradient buffer
  float* state = nullptr;     // the flat state buffer (running statistics)
  // Joins read every input: srcs[k] / diff_srcs[k] for input k.
  std::vector<const float*> srcs;
  std::vector<float*> diff_srcs;
  float* discard = nullptr;   // room for any activation: an input gradient nobody reads
  void* own = nullptr;        // private_bytes() of device memory for this op alone
  const int64_t* steps_done = nullptr;  // device: training steps applied (dropout's masks)
};

class CudaOp {
 public:
  virtual ~CudaOp() = default;
  virtual bool is_view() const { return false; }
  virtual std::size_t private_bytes() const { return 0; }
  virtual void bind(CudaContext& ctx, const OpBuffers& buffers) = 0;
  virtual void forward(CudaContext& ctx, bool training) = 0;
  // Writes (overwrites) this layer's parameter gradients and, when bound, diff_src.
  virtual void backward(CudaContext& ctx) = 0;
};

// seed: the layer's own (dropout masks; dropout_layer_seed in dropout_mask.h).
// A frozen layer (plan.trainable false) writes no parameter gradients (they
// stay zero) and a frozen batch norm runs on its running statistics.
std::unique_ptr<CudaOp> make_cuda_op(const nn::LayerPlan& plan, int64_t batch, uint64_t seed);

}  // namespace convoy::cuda
