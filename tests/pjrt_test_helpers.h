#pragma once
// Shared by the PJRT tests: skip, naming why, where no PJRT CPU plugin can
// run (a build without pjrt_c_api.h, or no plugin in .peers/py: bash
// setup.sh installs both); compile a model on both backends from identical
// weights.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"

#define REQUIRE_PJRT()                                                                   \
  do {                                                                                   \
    const convoy::PjrtReport& report = convoy::find_pjrt("pjrt");                        \
    if (!report.usable()) GTEST_SKIP() << "no PJRT CPU plugin: " << report.why_unusable; \
  } while (0)

// Replicas need devices: XLA's CPU plugin makes as many as asked for; any
// other plugin (bench/gpu_check.sh runs these tests on JAX's CUDA plugin)
// has the chips it has, and a test needing more skips saying so.
#define REQUIRE_PJRT_DEVICES(n)                                                                          \
  do {                                                                                                   \
    REQUIRE_PJRT();                                                                                      \
    const convoy::PjrtReport& r = convoy::find_pjrt("pjrt");                                             \
    if (r.platform != "cpu" && r.devices.size() < static_cast<std::size_t>(n))                           \
      GTEST_SKIP() << r.plugin << " has " << r.devices.size() << " device(s); this test needs " << (n); \
  } while (0)

namespace convoy::testing {

// Tears the PJRT clients down after the last test, before static objects go
// (release_pjrt_clients in backends/devices.h says why).
class ReleasePjrtClients : public ::testing::Environment {
 public:
  void TearDown() override { release_pjrt_clients(); }
};

struct Pair {
  std::unique_ptr<Executable> cpu, pjrt;
};

inline Pair compile_cpu_and_pjrt(const nn::Model& model, const CompileOptions& options, uint64_t seed = 7) {
  Pair p{compile_cpu(model, options, seed), compile_pjrt(model, options, seed)};
  // Identical weights: the CPU's, copied over (the same seed gives them anyway).
  p.pjrt->internals().write(Held::parameters, p.cpu->internals().copy_of(Held::parameters));
  p.pjrt->internals().write(Held::state, p.cpu->internals().copy_of(Held::state));
  return p;
}

}  // namespace convoy::testing
