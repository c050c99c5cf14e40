// find_pjrt (backends/devices.h): the plugin a device name means, and its
// client's devices, or one line saying why it cannot be used.
#include <map>
#include <mutex>

#include "backends/pjrt/plugin.h"
#include "backends/pjrt/plugin_names.h"
#include "convoy/backends/devices.h"
#include "convoy/core/error.h"

namespace convoy {

const PjrtReport& find_pjrt(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, PjrtReport> reports;  // nodes stay put: references stay valid
  std::lock_guard lock(mutex);
  if (auto it = reports.find(name); it != reports.end()) return it->second;
  PjrtReport r;
  r.plugin = pjrt::find_plugin(name, r.why_unusable);
  if (!r.plugin.empty()) r.why_unusable = pjrt::missing_accelerator(r.plugin);
  if (!r.plugin.empty() && r.why_unusable.empty()) {
    try {
      // A plugin whose accelerator is absent (libtpu on a machine without a
      // TPU) fails here, in client creation, with its own words.
      pjrt::Client& client = pjrt::Client::open(r.plugin);
      r.platform = client.platform();
      r.version = "PJRT C API " + client.api_version() + ", " + client.platform_version();
      for (const auto& d : client.devices())
        r.devices.push_back(std::to_string(d.id) + " " + d.kind + " (" + d.description + ")");
    } catch (const UserError& e) {
      r.why_unusable = e.what();
    }
  }
  return reports.emplace(name, std::move(r)).first->second;
}

void release_pjrt_clients() { pjrt::destroy_pjrt_clients(); }

}  // namespace convoy
