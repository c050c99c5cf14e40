// compile_pjrt (backends/devices.h): the selected plugin's client, with as
// many devices as replicas, and a Program on the PJRT device.
#include "backends/pjrt/coverage.h"
#include "backends/pjrt/pjrt_device.h"
#include "backends/pjrt/plugin.h"
#include "convoy/backends/devices.h"
#include "convoy/core/error.h"

namespace convoy {

std::unique_ptr<Executable> compile_pjrt(const nn::Model& model, const CompileOptions& options, uint64_t seed) {
  require_fp32(options.precision, "PJRT");
  require(options.pjrt.replicas >= 1, "--replicas must be at least 1, got " + std::to_string(options.pjrt.replicas));
  std::string path = options.pjrt.plugin;
  if (path.empty()) {  // compiled without choose_device (tests, the library): the default plugin
    const PjrtReport& r = find_pjrt("pjrt");
    require(r.usable(), "--device pjrt: " + r.why_unusable);
    path = r.plugin;
  }
  const std::string why = pjrt::pjrt_unsupported(model, options);
  require(why.empty(), "--device pjrt: " + why + "; train this model on the CPU (--device cpu)");
  return compile_pjrt_program(model, options, seed, pjrt::Client::open(path, options.pjrt.replicas));
}

}  // namespace convoy
