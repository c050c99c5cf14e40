#include "convoy/backends/devices.h"

#include <atomic>
#include <map>
#include <mutex>

#include "backends/cuda_probe.h"
#include "convoy/core/error.h"

namespace convoy {
namespace {

std::atomic<int> g_selected{0};

}  // namespace

void select_gpu(int index) {
  require(index >= 0, "GPU index must not be negative, got " + std::to_string(index));
  g_selected.store(index);
}

int selected_gpu() { return g_selected.load(); }

const GpuReport& find_gpus() {
  // One probe per selected GPU; map nodes stay put, so references stay valid.
  static std::mutex mutex;
  static std::map<int, GpuReport> reports;
  const int index = selected_gpu();
  std::lock_guard lock(mutex);
  auto it = reports.find(index);
  if (it == reports.end()) it = reports.emplace(index, cuda::probe_gpus(index)).first;
  return it->second;
}

DeviceChoice choose_device(const std::string& requested) {
  if (requested == "cpu") return {};
  if (is_pjrt_device(requested)) {
    const PjrtReport& pjrt = find_pjrt(requested);
    if (!pjrt.usable())
      return {.kind = DeviceKind::cpu, .fallback = "--device " + requested + ": " + pjrt.why_unusable + "; training on the CPU"};
    select_pjrt_plugin(pjrt.plugin);
    return {.kind = DeviceKind::pjrt};
  }
  require(requested == "auto" || requested == "cuda",
          "unknown device '" + requested + "' (--device, training.device); use auto, cpu, cuda, pjrt, pjrt:PLUGIN.so, tpu or pjrt-gpu");
  const GpuReport& gpus = find_gpus();
  if (gpus.usable()) return {.kind = DeviceKind::cuda};
  require(requested == "auto", "--device cuda: no usable GPU: " + gpus.why_unusable + "; use --device auto or cpu");
  return {.kind = DeviceKind::cpu, .fallback = "no usable GPU (" + gpus.why_unusable + "); training on the CPU"};
}

std::unique_ptr<Executable> compile_on(DeviceKind kind, const nn::Model& model, const CompileOptions& options,
                                       uint64_t seed) {
  if (kind == DeviceKind::pjrt) return compile_pjrt(model, options, seed);
  return kind == DeviceKind::cuda ? compile_cuda(model, options, seed) : compile_cpu(model, options, seed);
}

}  // namespace convoy
