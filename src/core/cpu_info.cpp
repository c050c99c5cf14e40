#include "convoy/core/cpu_info.h"

#include <fstream>
#include <set>
#include <sstream>

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

}  // namespace convoy
