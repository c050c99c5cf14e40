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

}  // namespace convoy
