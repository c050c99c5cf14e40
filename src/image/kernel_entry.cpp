// The entry point of one instruction set's copy of the image kernels
// (cmake/isa_units.cmake): the functions named here are that copy's own.
#include "core/isa_entry.h"
#include "image/image_kernels.h"

extern "C" const convoy::image::KernelEntry* CONVOY_ISA_ENTRY(convoy_image_kernels)() {
  static const convoy::image::KernelEntry entry{&convoy::image::resize_into, &convoy::image::warp_affine};
  return &entry;
}
