// resize_into and warp_affine as the rest of the library sees them: the
// copy of the image kernels (image_kernels.h) for the best instruction set
// this CPU runs, chosen once, so a machine always resamples the same way.
#include "core/isa_entry.h"
#include "image/image_kernels.h"

namespace convoy::image {
namespace {

const KernelEntry& kernels() {
  static const KernelEntry& best = isa_copy(KernelSet::automatic, convoy_image_kernels_base,
                                            convoy_image_kernels_avx2, convoy_image_kernels_avx512);
  return best;
}

}  // namespace

void resize_into(ImageView src, MutableImageView dst, ResizeMethod method) {
  kernels().resize_into(src, dst, method);
}

void warp_affine(ImageView src, MutableImageView dst, const Affine& out_to_src, FillMode fill, uint8_t fill_value) {
  kernels().warp_affine(src, dst, out_to_src, fill, fill_value);
}

Image resize(ImageView src, int width, int height, ResizeMethod method) {
  Image out(width, height, src.channels);
  resize_into(src, out.view(), method);
  return out;
}

}  // namespace convoy::image
