#pragma once
// Every CUDA, cuDNN and cuBLAS call is checked; a failure throws with the
// call's own text, so a report names exactly what went wrong:
//   CUDA_CHECK(cudaMalloc(&p, bytes));
//   -> "cudaMalloc(&p, bytes) failed: out of memory (backends/cuda/cuda_device.cpp:88)"
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace convoy::cuda {

[[noreturn]] void fail(const char* call, const char* what, const char* file, int line);

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) fail(call, cudaGetErrorString(e), file, line);
}
inline void check(cudnnStatus_t s, const char* call, const char* file, int line) {
  if (s != CUDNN_STATUS_SUCCESS) fail(call, cudnnGetErrorString(s), file, line);
}
void check(cublasStatus_t s, const char* call, const char* file, int line);

// After a kernel launch: launch errors (bad configuration, no kernel image).
#define CUDA_CHECK_LAUNCH(name) ::convoy::cuda::check(cudaGetLastError(), name, __FILE__, __LINE__)

}  // namespace convoy::cuda

#define CUDA_CHECK(call) ::convoy::cuda::check((call), #call, __FILE__, __LINE__)
