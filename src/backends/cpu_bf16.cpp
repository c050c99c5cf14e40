// Whether the CPU backend can run bf16 (CompileOptions::precision) here. Two
// questions: does the CPU have the instructions (/proc/cpuinfo), and will
// oneDNN use them (its ISA detection, which DNNL_MAX_CPU_ISA can lower).
// Without them oneDNN would refuse bf16 primitives or emulate them slowly.
#include <algorithm>

#include <oneapi/dnnl/dnnl.hpp>

#include "convoy/backends/devices.h"
#include "convoy/core/cpu_info.h"

namespace convoy {

std::string cpu_bf16_missing() {
  const CpuInfo cpu = cpu_info();
  if (std::find(cpu.isa.begin(), cpu.isa.end(), "avx512_bf16") == cpu.isa.end())
    return "this CPU (" + cpu.model + ") lacks AVX512-BF16";
  // oneDNN's ISA values are nested bit sets: AVX512-BF16 and every later one (AMX) hold its bits.
  const auto want = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  if ((static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & want) != want)
    return "oneDNN is limited below AVX512-BF16 on this CPU (DNNL_MAX_CPU_ISA)";
  return "";
}

}  // namespace convoy
