#pragma once
// The PJRT C API from convoy's side: load a plugin (a shared library exporting
// GetPjrtApi, as JAX's, TensorFlow's and PyTorch/XLA's accelerators do),
// create one client on it, and move f32/s32 arrays in and out of its
// devices, compile StableHLO programs (MLIR text) and run them.
//
// Every PJRT error becomes a UserError of one line: "pjrt <what>: <the
// plugin's message>". Nothing here knows about models: the StableHLO comes
// from backends/pjrt/stablehlo_*.
//
// Plugins are loaded once per process and never unloaded (XLA's plugins keep
// threads and static state that do not survive dlclose); clients are cached
// per plugin for the same reason and because creating one takes a while (XLA's
// CPU plugin gets a second client when more devices are asked for than its
// default one has).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Buffer;
struct PJRT_Device;
struct PJRT_LoadedExecutable;

namespace convoy::pjrt {

struct DeviceInfo {
  int id = 0;
  std::string kind;         // e.g. "cpu", "TPU v4"
  std::string description;  // the plugin's ToString
};

class Client;

// An array on one device. Owns its PJRT_Buffer; movable, not copyable.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const PJRT_Api* api, PJRT_Buffer* b) : api_(api), b_(b) {}
  Buffer(Buffer&& o) noexcept : api_(o.api_), b_(o.release()) {}
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }
  PJRT_Buffer* get() const { return b_; }
  PJRT_Buffer* release() {
    PJRT_Buffer* b = b_;
    b_ = nullptr;
    return b;
  }
  void reset();
  explicit operator bool() const { return b_ != nullptr; }

 private:
  const PJRT_Api* api_ = nullptr;
  PJRT_Buffer* b_ = nullptr;
};

// A compiled program, loaded on the client's devices.
class Program {
 public:
  Program(const PJRT_Api* api, PJRT_LoadedExecutable* e, std::size_t outputs, std::vector<int> devices)
      : api_(api), e_(e), outputs_(outputs), devices_(std::move(devices)) {}
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program();
  std::size_t outputs() const { return outputs_; }
  int replicas() const { return static_cast<int>(devices_.size()); }
  // Replica r runs on the client's device devices()[r]: its arguments must be there.
  const std::vector<int>& devices() const { return devices_; }
  PJRT_LoadedExecutable* get() const { return e_; }

 private:
  const PJRT_Api* api_;
  PJRT_LoadedExecutable* e_;
  std::size_t outputs_;
  std::vector<int> devices_;
};

// The one line a plugin with fewer devices than --replicas asks for gives.
std::string too_few_devices(const std::string& plugin_path, std::size_t have, int want);

// Destroys every client open() made (release_pjrt_clients in
// backends/devices.h); the next open() starts a new one.
void destroy_pjrt_clients();

class Client {
 public:
  // The client of `plugin_path` with at least `devices` devices (0 or 1: the
  // plugin's default client). When the default client has fewer, XLA's CPU
  // plugin is asked for that many (its create option cpu_device_count: the
  // seed's 8 replicas on one CPU); any other plugin's devices are real, and
  // too few is a UserError (too_few_devices). Throws UserError naming the
  // plugin when it does not load, is of another API major version, or the
  // client fails to start.
  static Client& open(const std::string& plugin_path, int devices = 0);
  ~Client();  // PJRT_Client_Destroy: its programs and buffers must be gone
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const std::string& plugin_path() const { return path_; }
  std::string platform() const;          // e.g. "cpu", "tpu", "cuda"
  std::string platform_version() const;  // the plugin's own words
  std::string api_version() const;       // "0.106"
  const std::vector<DeviceInfo>& devices() const { return infos_; }

  // Host arrays to device `device` (copied during the call).
  Buffer upload(std::span<const float> data, std::span<const int64_t> dims, int device = 0);
  Buffer upload(std::span<const int32_t> data, std::span<const int64_t> dims, int device = 0);
  // An array of StableHLO element type `elem` (f32, f64, i32, i64).
  Buffer upload(const void* data, const std::string& elem, std::span<const int64_t> dims, int device = 0);
  // The whole array into `out` (its size in bytes must match the buffer's).
  void download(const Buffer& b, void* out, std::size_t bytes) const;

  // MLIR text (StableHLO) compiled for `replicas` devices (one partition).
  std::unique_ptr<Program> compile(const std::string& mlir, int replicas = 1);
  // Runs `program` once per replica: args[r] are replica r's arguments.
  // Arguments the program donates (tf.aliasing_output) are consumed: their
  // Buffers must not be used again (the caller releases them). Returns each
  // replica's outputs.
  std::vector<std::vector<Buffer>> execute(Program& program, const std::vector<std::vector<PJRT_Buffer*>>& args);

 private:
  Client(std::string path, const PJRT_Api* api, PJRT_Client* client);
  static Client* create(const std::string& plugin_path, int cpu_devices);
  Buffer upload_raw(const void* data, int type, std::span<const int64_t> dims, int device);

  std::string path_;
  const PJRT_Api* api_;
  PJRT_Client* client_;
  std::vector<PJRT_Device*> devices_;
  std::vector<DeviceInfo> infos_;
};

}  // namespace convoy::pjrt
