// Field numbers from openxla/xla: xla/pjrt/proto/compile_options.proto
// (CompileOptionsProto, ExecutableBuildOptionsProto).
#include "backends/pjrt/compile_options.h"

#include <stdexcept>

#include "convoy/core/protobuf_wire.h"

namespace convoy::pjrt {
namespace {

constexpr uint32_t kExecutableBuildOptions = 3;  // CompileOptionsProto.executable_build_options
constexpr uint32_t kDeviceOrdinal = 1;           // ExecutableBuildOptionsProto.device_ordinal
constexpr uint32_t kNumReplicas = 4;             // ... .num_replicas
constexpr uint32_t kNumPartitions = 5;           // ... .num_partitions

}  // namespace

std::string compile_options_proto(int replicas, int partitions) {
  if (replicas < 1 || partitions < 1) throw std::logic_error("compile_options_proto: counts must be >= 1");
  proto::Writer build;
  build.int64(kDeviceOrdinal, -1);  // any device: the executable is placed at execution
  build.int64(kNumReplicas, replicas);
  build.int64(kNumPartitions, partitions);
  proto::Writer options;
  options.message(kExecutableBuildOptions, build);
  return options.take();
}

}  // namespace convoy::pjrt
