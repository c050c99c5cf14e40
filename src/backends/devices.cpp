#include "convoy/backends/devices.h"

#include "backends/cuda_probe.h"
#include "convoy/core/error.h"

namespace convoy {

const GpuReport& find_gpus() {
  static const GpuReport report = cuda::probe_gpus();  // thread-safe, once
  return report;
}

DeviceChoice choose_device(const std::string& requested) {
  if (requested == "cpu") return {};
  require(requested == "auto" || requested == "cuda",
          "unknown device '" + requested + "' (--device, training.device); use auto, cpu or cuda");
  const GpuReport& gpus = find_gpus();
  if (gpus.usable()) return {.kind = DeviceKind::cuda};
  require(requested == "auto", "--device cuda: no usable GPU: " + gpus.why_unusable + "; use --device auto or cpu");
  return {.kind = DeviceKind::cpu, .fallback = "no usable GPU (" + gpus.why_unusable + "); training on the CPU"};
}

std::unique_ptr<Executable> compile_on(DeviceKind kind, const nn::Model& model, const CompileOptions& options,
                                       uint64_t seed) {
  return kind == DeviceKind::cuda ? compile_cuda(model, options, seed) : compile_cpu(model, options, seed);
}

}  // namespace convoy
