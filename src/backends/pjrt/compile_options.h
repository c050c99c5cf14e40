#pragma once
// XLA's CompileOptionsProto, written with convoy's own protobuf writer
// (core/protobuf_wire.h): PJRT_Client_Compile takes compile options only in
// this serialized form, and the CPU plugin aborts the process (a CHECK, not
// an error) when they are empty, so every compile passes at least the
// replica and partition counts.
#include <string>

namespace convoy::pjrt {

// Serialized CompileOptionsProto whose executable_build_options set
// num_replicas and num_partitions (both >= 1).
std::string compile_options_proto(int replicas, int partitions);

}  // namespace convoy::pjrt
