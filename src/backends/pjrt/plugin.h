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
// per (plugin, device count) for the same reason and because creating one
// takes a while.
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
  Program(const PJRT_Api* api, PJRT_LoadedExecutable* e, std::size_t outputs, int replicas)
      : api_(api), e_(e), outputs_(outputs), replicas_(replicas) {}
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program();
  std::size_t outputs() const { return outputs_; }
  int replicas() const { return replicas_; }
  PJRT_LoadedExecutable* get() const { return e_; }

 private:
  const PJRT_Api* api_;
  PJRT_LoadedExecutable* e_;
  std::size_t outputs_;
  int replicas_;
};

class Client {
 public:
  // The client of `plugin_path` with at least `devices` devices (0: the
  // plugin's default). On a CPU plugin, devices > 1 asks for that many
  // (cpu_device_count). Throws UserError naming the plugin when it does not
  // load, is of another API major version, or the client fails to start.
  static Client& open(const std::string& plugin_path, int devices = 0);

  const std::string& plugin_path() const { return path_; }
  std::string platform() const;          // e.g. "cpu", "tpu", "cuda"
  std::string platform_version() const;  // the plugin's own words
  std::string api_version() const;       // "0.106"
  const std::vector<DeviceInfo>& devices() const { return infos_; }

  // Host arrays to device `device` (copied during the call).
  Buffer upload(std::span<const float> data, std::span<const int64_t> dims, int device = 0);
  Buffer upload(std::span<const int32_t> data, std::span<const int64_t> dims, int device = 0);
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
  Buffer upload_raw(const void* data, int type, std::span<const int64_t> dims, int device);

  std::string path_;
  const PJRT_Api* api_;
  PJRT_Client* client_;
  std::vector<PJRT_Device*> devices_;
  std::vector<DeviceInfo> infos_;
};

}  // namespace convoy::pjrt
