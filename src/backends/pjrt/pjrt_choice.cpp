// The PJRT parts of choosing a device that need no plugin and no PJRT
// header (backends/devices.h): names and model coverage.
#include "backends/pjrt/coverage.h"
#include "backends/pjrt/plugin_names.h"
#include "backends/pjrt/stablehlo_layers.h"
#include "convoy/backends/devices.h"

namespace convoy {

bool is_pjrt_device(const std::string& name) { return pjrt::is_pjrt_device_name(name); }

std::string pjrt_unsupported(const nn::Model& model) {
  if (std::string why = pjrt::layers_unsupported(model); !why.empty()) return why;
  if (model.output_shape().size() != 1)
    return "the PJRT backend needs a last layer that outputs [classes], got " + to_string(model.output_shape());
  return "";
}

std::string pjrt::pjrt_unsupported(const nn::Model& model, const CompileOptions& options) {
  if (std::string why = convoy::pjrt_unsupported(model); !why.empty()) return why;
  if (options.input_gradient) return "the PJRT backend does not compute input gradients (gradient checks run on the CPU)";
  return "";
}

}  // namespace convoy
