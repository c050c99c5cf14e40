#pragma once
// Shared by the CUDA tests: skip without a usable GPU, compile the same model
// on the CPU and the GPU with the same weights, and read an executable's
// buffers back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/rng.h"
#include "test_helpers.h"

namespace convoy::testing {

// CONVOY_TEST_CPU_AS_GPU=1 runs these tests with the CPU backend standing in
// for the GPU: a check of the tests' own logic on a machine without a GPU
// (every comparison is then CPU against CPU).
inline bool cpu_as_gpu() {
  const char* v = std::getenv("CONVOY_TEST_CPU_AS_GPU");
  return v && std::string(v) == "1";
}

inline std::unique_ptr<Executable> compile_gpu(const nn::Model& model, const CompileOptions& options, uint64_t seed) {
  return cpu_as_gpu() ? compile_cpu(model, options, seed) : compile_cuda(model, options, seed);
}

struct CpuAndGpu {
  std::unique_ptr<Executable> cpu, gpu;
};

// TF32 off: the GPU computes in plain fp32, so 1e-4 relative agreement holds.
inline CpuAndGpu compile_both(const nn::Model& model, CompileOptions options, uint64_t seed) {
  options.gpu.tf32 = false;
  return {compile_cpu(model, options, seed), compile_gpu(model, options, seed)};
}

inline std::vector<float> uniform_values(int64_t count, uint64_t seed, float lo = -1, float hi = 1) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (auto& x : v) x = rng.uniform(lo, hi);
  return v;
}

inline std::vector<int32_t> class_indices(int64_t count, int64_t classes, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> v(count);
  for (auto& x : v) x = static_cast<int32_t>(rng.below(classes));
  return v;
}

inline std::vector<float> parameters(const Executable& e) { return e.internals().copy_of(Held::parameters); }
inline std::vector<float> gradients(const Executable& e) { return e.internals().copy_of(Held::gradients); }
inline std::vector<float> state(const Executable& e) { return e.internals().copy_of(Held::state); }
inline std::vector<float> optimizer_state(const Executable& e) { return e.internals().copy_of(Held::optimizer_state); }
inline std::vector<float> output(const Executable& e) { return e.internals().copy_of(Held::output); }

// Each learned tensor of `model` compared on its own (a small tensor's error
// is not hidden by a large one's scale).
inline void expect_per_tensor(const nn::Model& model, const std::vector<float>& got, const std::vector<float>& want,
                              double tolerance, const char* what) {
  for (const auto& layer : model.layers())
    for (const auto& slot : layer.params)
      EXPECT_LT(relative_error({got.data() + slot.offset, static_cast<std::size_t>(slot.size())},
                               {want.data() + slot.offset, static_cast<std::size_t>(slot.size())}),
                tolerance)
          << what << " of " << slot.name;
}

}  // namespace convoy::testing

// Every GPU test starts with this: on a machine without a usable GPU (no
// driver, no device, CUDA backend not built) it reports skipped, saying why.
#define SKIP_WITHOUT_GPU()                                                                                \
  do {                                                                                                    \
    const convoy::GpuReport& gpus = convoy::find_gpus();                                                  \
    if (!gpus.usable() && !convoy::testing::cpu_as_gpu()) GTEST_SKIP() << "no usable GPU: " << gpus.why_unusable; \
  } while (0)
