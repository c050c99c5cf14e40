#include "convoy/core/cpu_info.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

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

namespace {

// The x86-64 micro-architecture levels from CPUID, with the OS's support for
// the wider registers (XCR0), as the compilers' -march=x86-64-v3 / -v4
// assume. Asked directly: clang's __builtin_cpu_supports knows no levels.
struct Levels {
  bool v3 = false, v4 = false;
};

Levels cpu_levels() {
  Levels l;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return l;
  const bool fma = c >> 12 & 1, movbe = c >> 22 & 1, osxsave = c >> 27 & 1, avx = c >> 28 & 1, f16c = c >> 29 & 1;
  if (!osxsave || !avx) return l;
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool ymm_state = (xcr0_lo & 0x6) == 0x6, zmm_state = (xcr0_lo & 0xe6) == 0xe6;
  unsigned b7 = 0, c7 = 0, d7 = 0;
  if (!__get_cpuid_count(7, 0, &a, &b7, &c7, &d7)) return l;
  const bool bmi1 = b7 >> 3 & 1, avx2 = b7 >> 5 & 1, bmi2 = b7 >> 8 & 1;
  const bool avx512f = b7 >> 16 & 1, avx512dq = b7 >> 17 & 1, avx512cd = b7 >> 28 & 1, avx512bw = b7 >> 30 & 1,
             avx512vl = b7 >> 31 & 1;
  unsigned ce = 0;
  const bool lzcnt = __get_cpuid(0x80000001, &a, &b, &ce, &d) && (ce >> 5 & 1);
  l.v3 = ymm_state && avx2 && fma && bmi1 && bmi2 && f16c && movbe && lzcnt;
  l.v4 = l.v3 && zmm_state && avx512f && avx512dq && avx512cd && avx512bw && avx512vl;
#endif
  return l;
}

}  // namespace

bool cpu_runs(KernelSet set) {
  static const Levels levels = cpu_levels();
  switch (set) {
    case KernelSet::automatic:
    case KernelSet::base: return true;
    case KernelSet::avx2: return levels.v3;
    case KernelSet::avx512: return levels.v4;
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
