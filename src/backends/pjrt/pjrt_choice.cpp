// The PJRT parts of choosing a device that need no plugin and no PJRT
// header (backends/devices.h): names, the selected plugin, model coverage.
#include <mutex>

#include "backends/pjrt/plugin_names.h"
#include "backends/pjrt/stablehlo_layers.h"
#include "convoy/backends/devices.h"

namespace convoy {
namespace {

std::mutex g_mutex;
std::string g_plugin;

}  // namespace

bool is_pjrt_device(const std::string& name) { return pjrt::is_pjrt_device_name(name); }

void select_pjrt_plugin(const std::string& plugin_path) {
  std::lock_guard lock(g_mutex);
  g_plugin = plugin_path;
}

const std::string& selected_pjrt_plugin() {
  std::lock_guard lock(g_mutex);
  return g_plugin;
}

std::string pjrt_unsupported(const nn::Model& model) {
  if (std::string why = pjrt::layers_unsupported(model); !why.empty()) return why;
  if (model.output_shape().size() != 1)
    return "the PJRT backend needs a last layer that outputs [classes], got " + to_string(model.output_shape());
  return "";
}

}  // namespace convoy
