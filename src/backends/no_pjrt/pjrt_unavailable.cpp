// Built instead of the PJRT runtime when CMake found no pjrt_c_api.h
// (pip's tensorflow wheel ships it; see docs/accelerators.md): the PJRT
// device names are known, and each says why it cannot be used.
#include "convoy/backends/devices.h"
#include "convoy/core/error.h"

namespace convoy {
namespace {

constexpr const char* kWhy =
    "this convoy was built without the PJRT C API header (pjrt_c_api.h); install the Python peers "
    "(bash setup.sh) and rebuild, see docs/accelerators.md";

}  // namespace

const PjrtReport& find_pjrt(const std::string&) {
  static const PjrtReport report{.why_unusable = kWhy};
  return report;
}

void release_pjrt_clients() {}

std::unique_ptr<Executable> compile_pjrt(const nn::Model&, const CompileOptions&, uint64_t) {
  throw UserError(std::string("no PJRT backend: ") + kWhy + "; train on the CPU (--device cpu)");
}

}  // namespace convoy
