// Built instead of backends/cuda/ when convoy is configured without the CUDA
// backend (-DCONVOY_CUDA=OFF, or no CUDA toolkit and cuDNN found).
#include "backends/cuda_probe.h"
#include "convoy/core/error.h"

namespace convoy {

namespace cuda {
GpuReport probe_gpus(int) {
  return {.gpus = {}, .why_unusable = "this convoy was built without the CUDA backend (CONVOY_CUDA=OFF)", .versions = {}};
}
}  // namespace cuda

std::unique_ptr<Executable> compile_cuda(const nn::Model&, const CompileOptions&, uint64_t) {
  throw UserError("no usable GPU: " + cuda::probe_gpus(0).why_unusable + "; train on the CPU (--device cpu)");
}

}  // namespace convoy
