#pragma once
// Names a per-instruction-set entry point (cmake/isa_units.cmake): inside a
// source compiled for AVX2, CONVOY_ISA_ENTRY(convoy_cpu_backend) is
// convoy_cpu_backend_avx2, the one global symbol of that copy.
#define CONVOY_ISA_JOIN2(name, isa) name##_##isa
#define CONVOY_ISA_JOIN(name, isa) CONVOY_ISA_JOIN2(name, isa)
#define CONVOY_ISA_ENTRY(name) CONVOY_ISA_JOIN(name, CONVOY_ISA_SUFFIX)

#include "convoy/core/cpu_info.h"

namespace convoy {

// The copy for `set` among one unit's three entry points (automatic: the best
// this CPU runs; a set it cannot run: UserError). The dispatchers outside the
// copies (backends/cpu_kernels.cpp, image/kernels_dispatch.cpp) pick with it.
template <class Entry>
const Entry& isa_copy(KernelSet set, const Entry* (*base)(), const Entry* (*avx2)(), const Entry* (*avx512)()) {
  switch (resolve_kernel_set(set)) {
    case KernelSet::avx512: return *avx512();
    case KernelSet::avx2: return *avx2();
    default: return *base();
  }
}

}  // namespace convoy
