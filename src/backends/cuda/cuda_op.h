#pragma once
// One layer's kernels on a CUDA GPU (the op contract: backends/op.h): the
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

#include "backends/op.h"
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

using convoy::OpBuffers;
using CudaOp = Op<CudaContext>;

// seed: the layer's own (dropout masks; dropout_layer_seed in dropout_mask.h).
// A frozen layer (plan.trainable false) writes no parameter gradients (they
// stay zero) and a frozen batch norm runs on its running statistics.
std::unique_ptr<CudaOp> make_cuda_op(const nn::LayerPlan& plan, int64_t batch, uint64_t seed);

}  // namespace convoy::cuda
