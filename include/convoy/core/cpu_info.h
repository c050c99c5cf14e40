#pragma once
// What this machine's CPU offers, for `convoy devices` and run summaries.
#include <string>
#include <vector>

namespace convoy {

struct CpuInfo {
  std::string model;              // e.g. "AMD EPYC 9454"
  std::vector<std::string> isa;   // the vector extensions that matter here: avx2, avx512f, amx_bf16, ...
  int threads = 0;                // hardware threads visible to this process
};

CpuInfo cpu_info();

// The instruction set convoy's own kernels are compiled for, once each
// (cmake/isa_units.cmake); one binary carries all three and picks at run time.
//   base:   the x86-64 baseline (SSE2), for any x86-64
//   avx2:   x86-64-v3 (AVX2, FMA, BMI2): Haswell, Zen and later
//   avx512: x86-64-v4 (AVX-512 F/BW/CD/DQ/VL): Skylake-SP, Zen 4 and later
// automatic: the best this CPU runs. The same machine always picks the same
// set, so a run's bits repeat; another set may differ in the last bits
// (fused multiply-adds), which is why summary.json records it.
enum class KernelSet { automatic, base, avx2, avx512 };

const char* kernel_set_name(KernelSet set);              // "base", "avx2", "avx512", "auto"
KernelSet parse_kernel_set(const std::string& name);     // the names above; UserError otherwise
bool cpu_runs(KernelSet set);                            // this CPU (and OS) can run it
KernelSet best_kernel_set();                             // the best set cpu_runs
// automatic -> best_kernel_set(); a named set this CPU cannot run -> UserError.
KernelSet resolve_kernel_set(KernelSet requested);

}  // namespace convoy
