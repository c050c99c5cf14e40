#include "convoy/backends/devices.h"

#include <map>
#include <mutex>

#include "backends/cuda_probe.h"
#include "convoy/core/error.h"

namespace convoy {
const GpuReport& find_gpus(int index) {
  require(index >= 0, "GPU index must not be negative, got " + std::to_string(index));
  // One probe per GPU asked about; map nodes stay put, so references stay valid.
  static std::mutex mutex;
  static std::map<int, GpuReport> reports;
  std::lock_guard lock(mutex);
  auto it = reports.find(index);
  if (it == reports.end()) it = reports.emplace(index, cuda::probe_gpus(index)).first;
  return it->second;
}

DeviceChoice choose_device(const std::string& requested, int gpu) {
  if (requested == "cpu") return {};
  if (is_pjrt_device(requested)) {
    const PjrtReport& pjrt = find_pjrt(requested);
    if (!pjrt.usable())
      return {.kind = DeviceKind::cpu, .fallback = "--device " + requested + ": " + pjrt.why_unusable + "; training on the CPU"};
    return {.kind = DeviceKind::pjrt, .pjrt_plugin = pjrt.plugin};
  }
  require(requested == "auto" || requested == "cuda",
          "unknown device '" + requested + "' (--device, training.device); use auto, cpu, cuda, pjrt, pjrt:PLUGIN.so, tpu or pjrt-gpu");
  const GpuReport& gpus = find_gpus(gpu);
  if (gpus.usable()) return {.kind = DeviceKind::cuda, .gpu = gpu};
  require(requested == "auto", "--device cuda: no usable GPU: " + gpus.why_unusable + "; use --device auto or cpu");
  return {.kind = DeviceKind::cpu, .fallback = "no usable GPU (" + gpus.why_unusable + "); training on the CPU"};
}

std::unique_ptr<Executable> compile_on(const DeviceChoice& device, const nn::Model& model, CompileOptions options,
                                       uint64_t seed) {
  options.gpu.index = device.gpu;
  options.pjrt.plugin = device.pjrt_plugin;
  if (device.kind == DeviceKind::pjrt) return compile_pjrt(model, options, seed);
  return device.kind == DeviceKind::cuda ? compile_cuda(model, options, seed) : compile_cpu(model, options, seed);
}

}  // namespace convoy
