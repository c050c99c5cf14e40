// The PJRT C API plumbing: see plugin.h.
#include "backends/pjrt/plugin.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>

#include "backends/pjrt/compile_options.h"
#include "convoy/core/error.h"
#include "xla/pjrt/c/pjrt_c_api.h"

namespace convoy::pjrt {
namespace {

// Arguments of a PJRT call, zeroed, with the struct size this header knows
// (a newer plugin reads only that much; an older one checks it).
#define PJRT_ARGS(type, name) \
  type name{};                \
  name.struct_size = type##_STRUCT_SIZE

std::string error_text(const PJRT_Api* api, PJRT_Error* e) {
  PJRT_ARGS(PJRT_Error_Message_Args, m);
  m.error = e;
  api->PJRT_Error_Message(&m);
  std::string text(m.message, m.message_size);
  PJRT_ARGS(PJRT_Error_Destroy_Args, d);
  d.error = e;
  api->PJRT_Error_Destroy(&d);
  for (char& c : text)
    if (c == '\n') c = ' ';  // one line
  return text;
}

void check(const PJRT_Api* api, PJRT_Error* e, const char* what) {
  if (e) throw UserError(std::string("pjrt ") + what + ": " + error_text(api, e));
}

void await(const PJRT_Api* api, PJRT_Event* event, const char* what) {
  if (!event) return;
  PJRT_ARGS(PJRT_Event_Await_Args, a);
  a.event = event;
  PJRT_Error* e = api->PJRT_Event_Await(&a);
  PJRT_ARGS(PJRT_Event_Destroy_Args, d);
  d.event = event;
  api->PJRT_Event_Destroy(&d);
  check(api, e, what);
}

const PJRT_Api* load_api(const std::string& path) {
  // One load per path for the whole process; never closed (see plugin.h).
  static std::mutex mutex;
  static std::map<std::string, const PJRT_Api*> loaded;
  std::lock_guard lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw UserError("pjrt: cannot load plugin " + path + ": " + ::dlerror());
  using GetApi = const PJRT_Api* (*)();
  auto get = reinterpret_cast<GetApi>(::dlsym(handle, "GetPjrtApi"));
  require(get != nullptr, "pjrt: " + path + " exports no GetPjrtApi; it is not a PJRT plugin");
  const PJRT_Api* api = get();
  require(api != nullptr, "pjrt: " + path + ": GetPjrtApi returned nothing");
  const int major = api->pjrt_api_version.major_version, minor = api->pjrt_api_version.minor_version;
  // Minor versions only add at the end; a major version changes the ABI.
  require(major == PJRT_API_MAJOR,
          "pjrt: " + path + " speaks PJRT C API " + std::to_string(major) + "." + std::to_string(minor) +
              ", this convoy was built against " + std::to_string(PJRT_API_MAJOR) + "." +
              std::to_string(PJRT_API_MINOR) + "; use a plugin of the same major version");
  require(api->struct_size >= offsetof(PJRT_Api, PJRT_Executable_OutputDimensions),
          "pjrt: " + path + " is too old (API " + std::to_string(major) + "." + std::to_string(minor) +
              "); use a plugin of API 0.40 or newer");
  if (api->PJRT_Plugin_Initialize) {
    PJRT_ARGS(PJRT_Plugin_Initialize_Args, init);
    check(api, api->PJRT_Plugin_Initialize(&init), "plugin initialisation");
  }
  loaded.emplace(path, api);
  return api;
}

std::string description_string(const PJRT_Api* api, PJRT_Device* device, DeviceInfo& info) {
  PJRT_ARGS(PJRT_Device_GetDescription_Args, g);
  g.device = device;
  check(api, api->PJRT_Device_GetDescription(&g), "device description");
  PJRT_ARGS(PJRT_DeviceDescription_Id_Args, id);
  id.device_description = g.device_description;
  check(api, api->PJRT_DeviceDescription_Id(&id), "device id");
  info.id = id.id;
  PJRT_ARGS(PJRT_DeviceDescription_Kind_Args, kind);
  kind.device_description = g.device_description;
  check(api, api->PJRT_DeviceDescription_Kind(&kind), "device kind");
  info.kind.assign(kind.device_kind, kind.device_kind_size);
  PJRT_ARGS(PJRT_DeviceDescription_ToString_Args, s);
  s.device_description = g.device_description;
  check(api, api->PJRT_DeviceDescription_ToString(&s), "device description");
  return {s.to_string, s.to_string_size};
}

}  // namespace

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    reset();
    api_ = o.api_;
    b_ = o.release();
  }
  return *this;
}

void Buffer::reset() {
  if (!b_) return;
  PJRT_ARGS(PJRT_Buffer_Destroy_Args, d);
  d.buffer = b_;
  if (PJRT_Error* e = api_->PJRT_Buffer_Destroy(&d)) error_text(api_, e);  // nothing to do about it here
  b_ = nullptr;
}

Program::~Program() {
  PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args, d);
  d.executable = e_;
  if (PJRT_Error* e = api_->PJRT_LoadedExecutable_Destroy(&d)) error_text(api_, e);
}

namespace {

// Every client this process opened, by (plugin, cpu_device_count; 0: the
// plugin's default), kept until release_pjrt_clients or exit.
std::mutex g_clients_mutex;
std::map<std::pair<std::string, int>, Client*> g_clients;

}  // namespace

void destroy_pjrt_clients() {
  std::lock_guard lock(g_clients_mutex);
  for (auto& [key, client] : g_clients) delete client;
  g_clients.clear();
}

Client::~Client() {
  PJRT_ARGS(PJRT_Client_Destroy_Args, d);
  d.client = client_;
  if (PJRT_Error* e = api_->PJRT_Client_Destroy(&d)) error_text(api_, e);
}

std::string too_few_devices(const std::string& plugin_path, std::size_t have, int want) {
  return "--replicas " + std::to_string(want) + ": " + plugin_path + " has " + std::to_string(have) +
         " device(s); use --replicas " + std::to_string(have) + " or fewer";
}

Client* Client::create(const std::string& plugin_path, int cpu_devices) {
  const PJRT_Api* api = load_api(plugin_path);
  PJRT_ARGS(PJRT_Client_Create_Args, c);
  static const char kCount[] = "cpu_device_count";
  PJRT_NamedValue option{};
  option.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  option.name = kCount;
  option.name_size = sizeof kCount - 1;
  option.type = PJRT_NamedValue_kInt64;
  option.int64_value = cpu_devices;
  option.value_size = 1;
  if (cpu_devices > 0) {
    c.create_options = &option;
    c.num_options = 1;
  }
  check(api, api->PJRT_Client_Create(&c), ("client creation (" + plugin_path + ")").c_str());
  return new Client(plugin_path, api, c.client);
}

Client& Client::open(const std::string& plugin_path, int devices) {
  std::lock_guard lock(g_clients_mutex);
  // At exit at the latest, while the plugin's own static objects (some made
  // lazily, after any handler registered at its loading) still live: a client
  // torn down after them aborts the process ("recursive_mutex lock failed"
  // from XLA's CPU plugin). Programs should release earlier (devices.h).
  static const bool at_exit = (std::atexit(destroy_pjrt_clients), true);
  (void)at_exit;
  auto cached = [&](int cpu_devices) -> Client& {
    auto key = std::make_pair(plugin_path, cpu_devices);
    auto it = g_clients.find(key);
    if (it == g_clients.end()) it = g_clients.emplace(key, create(plugin_path, cpu_devices)).first;
    return *it->second;
  };
  Client& standard = cached(0);
  const std::size_t have = standard.devices().size();
  if (devices <= 1 || have >= static_cast<std::size_t>(devices)) return standard;
  // Only XLA's CPU plugin makes devices on request; elsewhere they are chips.
  require(standard.platform() == "cpu", too_few_devices(plugin_path, have, devices));
  Client& more = cached(devices);
  require(more.devices().size() >= static_cast<std::size_t>(devices),
          too_few_devices(plugin_path, more.devices().size(), devices));
  return more;
}

Client::Client(std::string path, const PJRT_Api* api, PJRT_Client* client)
    : path_(std::move(path)), api_(api), client_(client) {
  PJRT_ARGS(PJRT_Client_AddressableDevices_Args, a);
  a.client = client_;
  check(api_, api_->PJRT_Client_AddressableDevices(&a), "device list");
  devices_.assign(a.addressable_devices, a.addressable_devices + a.num_addressable_devices);
  for (PJRT_Device* d : devices_) {
    DeviceInfo info;
    info.description = description_string(api_, d, info);
    infos_.push_back(std::move(info));
  }
  require(!devices_.empty(), "pjrt: " + path_ + " found no device; check that the accelerator is visible");
}

std::string Client::platform() const {
  PJRT_ARGS(PJRT_Client_PlatformName_Args, a);
  a.client = client_;
  check(api_, api_->PJRT_Client_PlatformName(&a), "platform name");
  return {a.platform_name, a.platform_name_size};
}

std::string Client::platform_version() const {
  PJRT_ARGS(PJRT_Client_PlatformVersion_Args, a);
  a.client = client_;
  check(api_, api_->PJRT_Client_PlatformVersion(&a), "platform version");
  return {a.platform_version, a.platform_version_size};
}

std::string Client::api_version() const {
  return std::to_string(api_->pjrt_api_version.major_version) + "." +
         std::to_string(api_->pjrt_api_version.minor_version);
}

Buffer Client::upload_raw(const void* data, int type, std::span<const int64_t> dims, int device) {
  require(device >= 0 && device < static_cast<int>(devices_.size()),
          "pjrt: device " + std::to_string(device) + " does not exist");
  PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args, a);
  a.client = client_;
  a.data = data;
  a.type = static_cast<PJRT_Buffer_Type>(type);
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
  a.device = devices_[device];
  check(api_, api_->PJRT_Client_BufferFromHostBuffer(&a), "upload");
  Buffer b(api_, a.buffer);
  await(api_, a.done_with_host_buffer, "upload");  // the host array may change after this call
  return b;
}

Buffer Client::upload(std::span<const float> data, std::span<const int64_t> dims, int device) {
  return upload_raw(data.data(), PJRT_Buffer_Type_F32, dims, device);
}

Buffer Client::upload(std::span<const int32_t> data, std::span<const int64_t> dims, int device) {
  return upload_raw(data.data(), PJRT_Buffer_Type_S32, dims, device);
}

Buffer Client::upload(const void* data, const std::string& elem, std::span<const int64_t> dims, int device) {
  const PJRT_Buffer_Type type = elem == "f32"   ? PJRT_Buffer_Type_F32
                                : elem == "f64" ? PJRT_Buffer_Type_F64
                                : elem == "i32" ? PJRT_Buffer_Type_S32
                                : elem == "i64" ? PJRT_Buffer_Type_S64
                                                : PJRT_Buffer_Type_INVALID;
  if (type == PJRT_Buffer_Type_INVALID) throw std::logic_error("pjrt upload: no element type " + elem);
  return upload_raw(data, type, dims, device);
}

void Client::download(const Buffer& b, void* out, std::size_t bytes) const {
  PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, size);
  size.src = b.get();
  check(api_, api_->PJRT_Buffer_ToHostBuffer(&size), "download size");
  if (size.dst_size != bytes)
    throw std::logic_error("pjrt download: buffer holds " + std::to_string(size.dst_size) + " bytes, " +
                           std::to_string(bytes) + " expected");
  PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, a);
  a.src = b.get();
  a.dst = out;
  a.dst_size = bytes;
  check(api_, api_->PJRT_Buffer_ToHostBuffer(&a), "download");
  await(api_, a.event, "download");
}

std::unique_ptr<Program> Client::compile(const std::string& mlir, int replicas) {
  require(replicas >= 1, "pjrt compile: at least one replica");
  require(replicas <= static_cast<int>(devices_.size()), too_few_devices(path_, devices_.size(), replicas));
  static const char kFormat[] = "mlir";
  PJRT_Program program{};
  program.struct_size = PJRT_Program_STRUCT_SIZE;
  program.code = const_cast<char*>(mlir.data());  // read only for compiling
  program.code_size = mlir.size();
  program.format = kFormat;
  program.format_size = sizeof kFormat - 1;
  // Never empty: the CPU plugin aborts the process on empty options.
  const std::string options = compile_options_proto(replicas, /*partitions=*/1);
  PJRT_ARGS(PJRT_Client_Compile_Args, a);
  a.client = client_;
  a.program = &program;
  a.compile_options = options.data();
  a.compile_options_size = options.size();
  check(api_, api_->PJRT_Client_Compile(&a), "compile");
  PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, g);
  g.loaded_executable = a.executable;
  check(api_, api_->PJRT_LoadedExecutable_GetExecutable(&g), "compile");
  PJRT_ARGS(PJRT_Executable_NumOutputs_Args, n);
  n.executable = g.executable;
  PJRT_Error* e = api_->PJRT_Executable_NumOutputs(&n);
  PJRT_ARGS(PJRT_Executable_Destroy_Args, d);
  d.executable = g.executable;
  api_->PJRT_Executable_Destroy(&d);
  // Which device runs each replica (argument list r goes to devices[r]).
  PJRT_ARGS(PJRT_LoadedExecutable_AddressableDevices_Args, on);
  on.executable = a.executable;
  if (!e) e = api_->PJRT_LoadedExecutable_AddressableDevices(&on);
  std::vector<int> devices;
  for (std::size_t r = 0; !e && r < on.num_addressable_devices; ++r) {
    const auto it = std::find(devices_.begin(), devices_.end(), on.addressable_devices[r]);
    if (it == devices_.end()) throw std::logic_error("pjrt compile: a replica on a device this client does not list");
    devices.push_back(static_cast<int>(it - devices_.begin()));
  }
  auto loaded = std::make_unique<Program>(api_, a.executable, n.num_outputs, std::move(devices));
  check(api_, e, "compile");
  if (loaded->replicas() != replicas)
    throw std::logic_error("pjrt compile: " + std::to_string(replicas) + " replicas asked for, the program runs on " +
                           std::to_string(loaded->replicas()) + " device(s)");
  return loaded;
}

std::vector<std::vector<Buffer>> Client::execute(Program& program,
                                                 const std::vector<std::vector<PJRT_Buffer*>>& args) {
  const std::size_t replicas = args.size();
  require(static_cast<int>(replicas) == program.replicas(), "pjrt execute: one argument list per replica expected");
  std::vector<PJRT_Buffer* const*> arg_lists;
  for (const auto& a : args) arg_lists.push_back(a.data());
  std::vector<std::vector<PJRT_Buffer*>> outs(replicas, std::vector<PJRT_Buffer*>(program.outputs()));
  std::vector<PJRT_Buffer**> out_lists;
  for (auto& o : outs) out_lists.push_back(o.data());
  std::vector<PJRT_Event*> done(replicas, nullptr);
  PJRT_ARGS(PJRT_ExecuteOptions, options);
  PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args, a);
  a.executable = program.get();
  a.options = &options;
  a.argument_lists = arg_lists.data();
  a.num_devices = replicas;
  a.num_args = args.empty() ? 0 : args[0].size();
  a.output_lists = out_lists.data();
  a.device_complete_events = done.data();
  check(api_, api_->PJRT_LoadedExecutable_Execute(&a), "execute");
  std::vector<std::vector<Buffer>> result(replicas);
  for (std::size_t r = 0; r < replicas; ++r)
    for (PJRT_Buffer* b : outs[r]) result[r].emplace_back(api_, b);
  // Errors inside the program show here, not as corrupt outputs later.
  for (PJRT_Event* event : done) await(api_, event, "execute");
  return result;
}

}  // namespace convoy::pjrt
