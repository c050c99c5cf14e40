#pragma once
// Which plugin file a --device name means; needs no PJRT header.
#include <string>

namespace convoy::pjrt {

// "pjrt" → the CPU plugin (env CONVOY_PJRT_PLUGIN, then pip's
// fastatomstruct-xla-cpu in the project's .peers/py or the active virtual
// environment); "pjrt:/path/libx.so" → that file; "tpu" → pip's libtpu;
// "pjrt-gpu" → pip's jax-cuda13-pjrt plugin. Returns the path, or empty
// with `why` saying what is missing and how to install it.
std::string find_plugin(const std::string& device_name, std::string& why);

// Empty when the accelerator `plugin_path` drives may be present; else why
// it is not. libtpu on a machine without a TPU does not fail: it retries
// Google Cloud's metadata server for minutes, so its absence is checked
// first (a TPU shows as /dev/accel* or /dev/vfio/<group>).
std::string missing_accelerator(const std::string& plugin_path);

// True for the names above (pjrt, pjrt:PATH, tpu, pjrt-gpu).
bool is_pjrt_device_name(const std::string& device_name);

}  // namespace convoy::pjrt
