#include "convoy/core/cpu_info.h"

#include <fstream>
#include <set>
#include <sstream>

#include "convoy/core/error.h"
#include "convoy/core/threads.h"

namespace convoy {

CpuInfo cpu_info() {
  CpuInfo info;
  info.threads = hardware_threads();
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_first_of(" \t"));
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model" && line.starts_with("model name") && info.model.empty()) info.model = value;
    if (key == "flags" && flags.empty()) {
      std::istringstream words(value);
      for (std::string w; words >> w;) flags.insert(w);
    }
  }
  for (const char* f : {"sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
                        "amx_tile", "amx_bf16", "amx_int8"})
    if (flags.count(f)) info.isa.push_back(f);
  if (info.model.empty()) info.model = "unknown CPU";
  return info;
}

const char* kernel_set_name(KernelSet set) {
  switch (set) {
    case KernelSet::automatic: return "auto";
    case KernelSet::base: return "base";
    case KernelSet::avx2: return "avx2";
    case KernelSet::avx512: return "avx512";
  }
  return "?";
}

KernelSet parse_kernel_set(const std::string& name) {
  for (KernelSet s : {KernelSet::automatic, KernelSet::base, KernelSet::avx2, KernelSet::avx512})
    if (name == kernel_set_name(s)) return s;
  throw UserError("unknown CPU kernel set '" + name + "'; available: auto, base, avx2, avx512");
}

bool cpu_runs(KernelSet set) {
  // The micro-architecture levels ask for every feature of the level and for
  // the OS's support of the wider registers (XSAVE state), as the compiler's
  // -march=x86-64-v3 / -v4 assume.
  __builtin_cpu_init();
  switch (set) {
    case KernelSet::automatic:
    case KernelSet::base: return true;
    case KernelSet::avx2: return __builtin_cpu_supports("x86-64-v3");
    case KernelSet::avx512: return __builtin_cpu_supports("x86-64-v4");
  }
  return false;
}

KernelSet best_kernel_set() {
  for (KernelSet s : {KernelSet::avx512, KernelSet::avx2})
    if (cpu_runs(s)) return s;
  return KernelSet::base;
}

KernelSet resolve_kernel_set(KernelSet requested) {
  if (requested == KernelSet::automatic) return best_kernel_set();
  if (!cpu_runs(requested))
    throw UserError(std::string("this CPU cannot run the ") + kernel_set_name(requested) +
                    " kernels; use auto (here: " + kernel_set_name(best_kernel_set()) + ")");
  return requested;
}

}  // namespace convoy
