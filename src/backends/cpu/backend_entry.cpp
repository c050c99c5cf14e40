// The entry point of one instruction set's copy of the CPU backend: compiled
// once per set with the rest of backends/cpu and optim/optimizer_update.cpp
// (cmake/isa_units.cmake), so the functions named here are that copy's own.
#include "backends/cpu/backend_entry.h"

#include "core/isa_entry.h"

extern "C" const convoy::cpu::BackendEntry* CONVOY_ISA_ENTRY(convoy_cpu_backend)() {
  static const convoy::cpu::BackendEntry entry{&convoy::cpu::make_cpu_device, &convoy::optim::step,
                                               &convoy::cpu::make_cpu_op, &convoy::cpu::make_unfused_cpu_device,
                                               &convoy::cpu::make_cpu_ops};
  return &entry;
}
