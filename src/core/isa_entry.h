#pragma once
// Names a per-instruction-set entry point (cmake/isa_units.cmake): inside a
// source compiled for AVX2, CONVOY_ISA_ENTRY(convoy_cpu_backend) is
// convoy_cpu_backend_avx2, the one global symbol of that copy.
#define CONVOY_ISA_JOIN2(name, isa) name##_##isa
#define CONVOY_ISA_JOIN(name, isa) CONVOY_ISA_JOIN2(name, isa)
#define CONVOY_ISA_ENTRY(name) CONVOY_ISA_JOIN(name, CONVOY_ISA_SUFFIX)
