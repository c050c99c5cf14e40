#pragma once
// Which devices convoy can train on: the CPU always; CUDA GPUs when the CUDA
// backend is built in and a driver and a GPU are present; PJRT plugins
// (XLA's CPU, TPU and GPU plugins: "pjrt", "pjrt:PLUGIN.so", "tpu",
// "pjrt-gpu") when the PJRT backend is built in. "auto" picks the
// GPU when one is usable and otherwise says, in one line, why it uses the CPU
// (the seed's "locate the TPU, else GPU, else CPU").
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "convoy/backends/executable.h"

namespace convoy {

struct GpuInfo {
  int index = 0;
  std::string name;          // e.g. "NVIDIA H200"
  int64_t memory_bytes = 0;  // total device memory
  int major = 0, minor = 0;  // compute capability
};

struct GpuReport {
  std::vector<GpuInfo> gpus;  // every CUDA GPU found; convoy trains on the one asked for (0 by default)
  std::string why_unusable;   // empty when convoy can train on that GPU; else why not (not built, no driver, ...)
  std::string versions;       // driver, runtime, cuDNN and cuBLAS versions, when a driver answered
  bool usable() const { return !gpus.empty() && why_unusable.empty(); }
};

// Looks for CUDA GPUs and checks that GPU `gpu` (CUDA's index, after
// CUDA_VISIBLE_DEVICES) is usable (a driver, kernels for its architecture in
// this build, cuDNN and cuBLAS start on it). Never throws; the answer is
// computed once per process and GPU. The nccl strategy asks for its
// replica's own GPU (dist::Strategy::gpu), everything else for GPU 0.
const GpuReport& find_gpus(int gpu = 0);

// A PJRT plugin and its client's devices (backends/pjrt/).
struct PjrtReport {
  std::string plugin;                // the plugin file, when found
  std::string platform;              // e.g. "cpu", "tpu", "cuda", when its client started
  std::string version;               // PJRT C API and platform versions
  std::vector<std::string> devices;  // one line per device
  std::string why_unusable;          // empty when convoy can train on it
  bool usable() const { return !devices.empty() && why_unusable.empty(); }
};

// True for the PJRT device names: pjrt, pjrt:PLUGIN.so, tpu, pjrt-gpu.
bool is_pjrt_device(const std::string& name);
// Finds the plugin a PJRT device name means and starts a client on it.
// Never throws; computed once per name and process.
const PjrtReport& find_pjrt(const std::string& name);
// Destroys every PJRT client this process opened; their executables and
// buffers must be gone. Call it before main returns (convoy's CLI does): XLA's
// CPU plugin can abort the process ("recursive_mutex lock failed") when its
// client is torn down at exit, after the plugin's own static objects. A later
// compile opens a new client. Without the PJRT backend: nothing.
void release_pjrt_clients();
// Empty when the PJRT backend emits every layer of `model`; else one line
// naming the first layer it has no StableHLO for. Needs no plugin.
std::string pjrt_unsupported(const nn::Model& model);

enum class DeviceKind { cpu, cuda, pjrt };

struct DeviceChoice {
  DeviceKind kind = DeviceKind::cpu;
  std::string fallback;     // for "auto" without a usable GPU: one line saying why the CPU is used
  int gpu = 0;              // cuda: which GPU (CompileOptions::Gpu::index)
  std::string pjrt_plugin;  // pjrt: the plugin file (CompileOptions::Pjrt::plugin)
};

// requested: "auto", "cpu", "cuda" or a PJRT name; gpu: the GPU "auto" and
// "cuda" look at. Throws UserError for an unknown name, and for "cuda" when
// that GPU is not usable (naming why). A PJRT name whose plugin or device is
// missing falls back to the CPU, saying why in `fallback`, as "auto" does.
DeviceChoice choose_device(const std::string& requested, int gpu = 0);

// Empty when the CUDA backend can train `model`; else one line naming the
// first layer (or setting) it has no kernels for. Needs no GPU.
std::string cuda_unsupported(const nn::Model& model);

// As above, for this model: a GPU that cannot run it is no choice. "cuda"
// then throws UserError naming the layer; "auto" falls back to the CPU. A
// PJRT name throws UserError naming the layer the PJRT backend lacks.
DeviceChoice choose_device(const std::string& requested, const nn::Model& model, int gpu = 0);

// Empty when this CPU can train in bf16 (CompileOptions::precision): it has
// AVX512-BF16 and oneDNN's instruction-set limit (DNNL_MAX_CPU_ISA) admits
// it; else one line saying which is missing. compile_cpu throws UserError
// with that line for a bf16 run, rather than train slowly in emulation.
std::string cpu_bf16_missing();
// Whether bf16 runs here on AMX-BF16 tiles (oneDNN's avx512_core_amx, which
// DNNL_MAX_CPU_ISA can lower): there oneDNN's AMX kernels take most
// convolution passes from convoy's own fp32 kernels (backends/cpu/amx_passes.h).
bool cpu_bf16_on_amx();

// Compiles on the chosen device: its GPU or plugin go into `options`.
std::unique_ptr<Executable> compile_on(const DeviceChoice& device, const nn::Model& model, CompileOptions options,
                                       uint64_t seed);

}  // namespace convoy
