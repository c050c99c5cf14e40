// Where the known PJRT plugins are, by --device name (plugin.h).
#include <cstdlib>
#include <filesystem>

#include "backends/pjrt/plugin_names.h"

#include <vector>

#ifndef CONVOY_PJRT_SITE_PACKAGES
#define CONVOY_PJRT_SITE_PACKAGES ""  // CMake: the project's .peers/py site-packages, when found
#endif

namespace convoy::pjrt {
namespace fs = std::filesystem;
namespace {

struct Known {
  const char* name;      // the --device name
  const char* relative;  // the file inside a site-packages folder
  const char* install;   // how to get it
};

constexpr Known kKnown[] = {
    {"pjrt", "fastatomstruct_xla_cpu/libpjrt_cpu.so",
     "pip install fastatomstruct-xla-cpu (into .peers/py: bash setup.sh does it), or set CONVOY_PJRT_PLUGIN"},
    {"tpu", "libtpu/libtpu.so", "on a TPU VM: pip install libtpu"},
    {"pjrt-gpu", "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
     "on a machine with an NVIDIA GPU: pip install jax-cuda13-pjrt"},
};

// site-packages folders to look in: the project's environment CMake saw,
// the active virtual environment, then the current folder's .peers/py.
std::vector<fs::path> site_packages() {
  std::vector<fs::path> dirs;
  if (*CONVOY_PJRT_SITE_PACKAGES) dirs.emplace_back(CONVOY_PJRT_SITE_PACKAGES);
  std::vector<fs::path> roots;
  if (const char* venv = std::getenv("VIRTUAL_ENV")) roots.emplace_back(venv);
  roots.emplace_back(".peers/py");
  std::error_code ec;
  for (const auto& root : roots)
    for (const auto& e : fs::directory_iterator(root / "lib", ec))
      if (e.path().filename().string().starts_with("python3")) dirs.push_back(e.path() / "site-packages");
  return dirs;
}

}  // namespace

std::string missing_accelerator(const std::string& plugin_path) {
  if (fs::path(plugin_path).filename() != "libtpu.so") return "";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev", ec))
    if (e.path().filename().string().starts_with("accel")) return "";
  for (const auto& e : fs::directory_iterator("/dev/vfio", ec))
    if (e.path().filename() != "vfio") return "";
  return "no TPU on this machine (no /dev/accel* or /dev/vfio device); libtpu runs on TPU VMs";
}

bool is_pjrt_device_name(const std::string& name) {
  return name == "pjrt" || name.starts_with("pjrt:") || name == "tpu" || name == "pjrt-gpu";
}

std::string find_plugin(const std::string& name, std::string& why) {
  std::error_code ec;
  if (name.starts_with("pjrt:")) {
    const std::string path = name.substr(5);
    if (fs::is_regular_file(path, ec)) return fs::absolute(path, ec).string();
    why = "no PJRT plugin at " + path;
    return "";
  }
  for (const Known& k : kKnown) {
    if (name != k.name) continue;
    if (name == "pjrt")
      if (const char* env = std::getenv("CONVOY_PJRT_PLUGIN"); env && *env) {
        if (fs::is_regular_file(env, ec)) return env;
        why = std::string("CONVOY_PJRT_PLUGIN names ") + env + ", which does not exist";
        return "";
      }
    for (const auto& dir : site_packages())
      if (fs::is_regular_file(dir / k.relative, ec)) return fs::absolute(dir / k.relative, ec).string();
    why = std::string("no ") + k.relative + " found (" + k.install + ")";
    return "";
  }
  why = "'" + name + "' is not a PJRT device name (pjrt, pjrt:PLUGIN.so, tpu, pjrt-gpu)";
  return "";
}

}  // namespace convoy::pjrt
