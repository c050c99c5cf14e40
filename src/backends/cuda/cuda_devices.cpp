// Device discovery through the CUDA runtime. A machine without a driver or a
// GPU is a normal case (CI, laptops): every failure becomes a reason string.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>

#include "backends/cuda/kernels.h"
#include "backends/cuda_probe.h"

namespace convoy::cuda {
namespace {

std::string version(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// Why GPU `index` cannot train convoy's models, or "" when it can.
std::string why_unusable(int index) {
  if (cudaSetDevice(index) != cudaSuccess) return "cudaSetDevice(" + std::to_string(index) + ") failed";
  std::string why;
  if (!kernels_run_here(why)) return why;
  cudnnHandle_t dnn = nullptr;
  if (const cudnnStatus_t s = cudnnCreate(&dnn); s != CUDNN_STATUS_SUCCESS)
    return std::string("cuDNN does not start on this GPU (cudnnCreate: ") + cudnnGetErrorString(s) + ")";
  cudnnDestroy(dnn);
  cublasHandle_t blas = nullptr;
  if (const cublasStatus_t s = cublasCreate(&blas); s != CUBLAS_STATUS_SUCCESS)
    return std::string("cuBLAS does not start on this GPU (cublasCreate: ") + cublasGetStatusString(s) + ")";
  cublasDestroy(blas);
  return "";
}

}  // namespace

GpuReport probe_gpus(int selected) {
  GpuReport r;
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  cudaGetLastError();  // a failed probe must not linger as the "last error"
  if (e == cudaErrorInsufficientDriver) {
    r.why_unusable = "no NVIDIA driver found, or one older than this build's CUDA runtime";
    return r;
  }
  if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0)) {
    r.why_unusable = "no CUDA GPU found";
    return r;
  }
  if (e != cudaSuccess) {
    r.why_unusable = std::string("the CUDA runtime found no usable GPU (cudaGetDeviceCount: ") +
                     cudaGetErrorString(e) + ")";
    return r;
  }
  int driver = 0, runtime = 0, blas = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  cublasGetProperty(MAJOR_VERSION, &blas);
  int blas_minor = 0;
  cublasGetProperty(MINOR_VERSION, &blas_minor);
  const size_t dnn = cudnnGetVersion();
  r.versions = "driver " + version(driver) + ", runtime " + version(runtime) + ", cuDNN " +
               std::to_string(dnn / 10000) + "." + std::to_string(dnn / 100 % 100) + "." + std::to_string(dnn % 100) +
               ", cuBLAS " + std::to_string(blas) + "." + std::to_string(blas_minor);
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    r.gpus.push_back({.index = i, .name = p.name, .memory_bytes = static_cast<int64_t>(p.totalGlobalMem),
                      .major = p.major, .minor = p.minor});
  }
  if (r.gpus.empty()) {
    r.why_unusable = "cudaGetDeviceProperties failed for every GPU";
    return r;
  }
  const auto gpu = std::find_if(r.gpus.begin(), r.gpus.end(), [&](const GpuInfo& g) { return g.index == selected; });
  if (gpu == r.gpus.end()) {
    r.why_unusable = "GPU " + std::to_string(selected) + " does not exist (" + std::to_string(count) +
                     " found; CUDA_VISIBLE_DEVICES may hide others)";
    return r;
  }
  r.why_unusable = why_unusable(selected);
  if (!r.why_unusable.empty()) r.why_unusable = "GPU " + std::to_string(selected) + " (" + gpu->name + "): " + r.why_unusable;
  cudaGetLastError();
  return r;
}

}  // namespace convoy::cuda
