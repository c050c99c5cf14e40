#pragma once
// The image kernels compiled once per instruction set (cmake/isa_units.cmake):
// resampling for resizes and affine warps. src/image/kernels_dispatch.cpp
// defines geometry.h's resize_into and warp_affine by picking a copy.
#include "convoy/image/geometry.h"

namespace convoy::image {

struct KernelEntry {
  void (*resize_into)(ImageView src, MutableImageView dst, ResizeMethod method);
  void (*warp_affine)(ImageView src, MutableImageView dst, const Affine& out_to_src, FillMode fill,
                      uint8_t fill_value);
};

}  // namespace convoy::image

extern "C" {
const convoy::image::KernelEntry* convoy_image_kernels_base();
const convoy::image::KernelEntry* convoy_image_kernels_avx2();
const convoy::image::KernelEntry* convoy_image_kernels_avx512();
}
