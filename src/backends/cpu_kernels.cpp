// The CPU backend as the rest of the library sees it: compile_cpu (a
// Program on the CPU device) and optim::step pick one of the backend's per-instruction-set copies
// (cmake/isa_units.cmake, backends/cpu/backend_entry.h) — the best this CPU
// runs, or the one CompileOptions::cpu_kernels names.
#include "backends/batch_slices.h"
#include "backends/cpu/backend_entry.h"
#include "backends/program.h"
#include "convoy/backends/devices.h"
#include "convoy/core/error.h"
#include "convoy/core/threads.h"
#include "core/isa_entry.h"

namespace convoy {
namespace cpu {

const BackendEntry& backend(KernelSet set) {
  return isa_copy(set, convoy_cpu_backend_base, convoy_cpu_backend_avx2, convoy_cpu_backend_avx512);
}

}  // namespace cpu

// One Program whose ops use every thread, or batch slices (backends/batch_slices.h).
std::unique_ptr<Executable> compile_cpu(const nn::Model& model, const CompileOptions& options, uint64_t seed) {
  if (options.precision == Precision::bf16) {
    const std::string missing = cpu_bf16_missing();
    require(missing.empty(), "--precision bf16: " + missing + "; use --precision fp32 (training.precision)");
  }
  const cpu::BackendEntry& entry = cpu::backend(options.cpu_kernels);
  if (const int64_t slices = choose_batch_slices(model, options, num_threads()); slices > 1)
    return make_batch_slices(model, options, seed, slices, [&] { return entry.make_device(options); });
  return std::make_unique<Program>(model, options, seed, entry.make_device(options));
}

namespace optim {

void step(const OptimizerOptions& opt, std::span<float> params, std::span<float> grads, std::span<float> state) {
  // Chosen once: the same machine always updates with the same copy.
  static const cpu::BackendEntry& best = cpu::backend(KernelSet::automatic);
  best.optimizer_step(opt, params, grads, state);
}

}  // namespace optim
}  // namespace convoy
