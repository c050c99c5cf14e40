// Whether the CPU backend can run bf16 (CompileOptions::precision) here. Two
// questions: does the CPU have the instructions (/proc/cpuinfo), and will
// oneDNN use them (its ISA detection, which DNNL_MAX_CPU_ISA can lower).
// Without them oneDNN would refuse bf16 primitives or emulate them slowly.
#include <algorithm>

#include "backends/cpu/dnnl_env.h"
#include "convoy/backends/devices.h"
#include "convoy/core/cpu_info.h"

namespace convoy {

std::string cpu_bf16_missing() {
  const CpuInfo cpu = cpu_info();
  if (std::find(cpu.isa.begin(), cpu.isa.end(), "avx512_bf16") == cpu.isa.end())
    return "this CPU (" + cpu.model + ") lacks AVX512-BF16";
  if (!cpu::DnnlEnv::onednn_isa_reaches(dnnl::cpu_isa::avx512_core_bf16))
    return "oneDNN is limited below AVX512-BF16 on this CPU (DNNL_MAX_CPU_ISA)";
  return "";
}

bool cpu_bf16_on_amx() {
  return cpu_bf16_missing().empty() && cpu::DnnlEnv::onednn_isa_reaches(dnnl::cpu_isa::avx512_core_amx);
}

}  // namespace convoy
