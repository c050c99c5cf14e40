#pragma once
// What the CPU backend's per-instruction-set copies offer the rest of the
// library (cmake/isa_units.cmake): the CPU device (backends/device.h) a
// Program compiles a model onto, and the optimizer's
// update (also called directly by library users as optim::step). The
// dispatcher, src/backends/cpu_kernels.cpp, picks a copy by KernelSet.
#include <cstdint>
#include <memory>
#include <span>

#include "backends/cpu/conv_pool_op.h"
#include "backends/cpu/cpu_op.h"
#include "backends/device.h"
#include "convoy/backends/executable.h"

namespace convoy::cpu {

struct BackendEntry {
  std::unique_ptr<Device> (*make_device)(const CompileOptions& options);
  void (*optimizer_step)(const optim::OptimizerOptions& opt, std::span<float> params, std::span<float> grads,
                         std::span<float> state);
  // One layer's op (the per-op benchmarks time them one by one).
  std::unique_ptr<CpuOp> (*make_cpu_op)(DnnlEnv& env, const nn::LayerPlan& plan, int64_t batch, uint64_t seed,
                                        ConvAlgo algo);
  // The CPU device with every layer on its own op, none fused
  // (conv_pool_op.h): the tests' reference for make_device's.
  std::unique_ptr<Device> (*make_unfused_device)(const CompileOptions& options);
  // A whole model's ops as make_device makes them (fuse) or one per layer.
  CpuOps (*make_cpu_ops)(DnnlEnv& env, const nn::Model& model, int64_t batch, const std::vector<uint64_t>& seeds,
                         ConvAlgo algo, bool input_gradient, bool fuse);
};

// This copy's CPU device (cpu_device.cpp), and the same without fused ops.
std::unique_ptr<Device> make_cpu_device(const CompileOptions& options);
std::unique_ptr<Device> make_unfused_cpu_device(const CompileOptions& options);

// The copy for `set` (automatic: the best this CPU runs); UserError when this
// CPU cannot run it. Defined outside the copies, in src/backends/cpu_kernels.cpp.
const BackendEntry& backend(KernelSet set);

}  // namespace convoy::cpu

// One per instruction set: convoy_cpu_backend_base, _avx2, _avx512.
extern "C" {
const convoy::cpu::BackendEntry* convoy_cpu_backend_base();
const convoy::cpu::BackendEntry* convoy_cpu_backend_avx2();
const convoy::cpu::BackendEntry* convoy_cpu_backend_avx512();
}
