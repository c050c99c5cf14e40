#pragma once
// Which passes of a convolution run on oneDNN's AMX kernels in bf16 under
// --precision bf16 on a CPU where oneDNN multiplies bf16 in AMX tiles
// (DnnlEnv::bf16_on_amx); the others run as in fp32, on convoy's own kernels
// (Winograd, direct, small-map: what `automatic` picks) or oneDNN's fp32
// ones, with no conversions. A fixed rule by geometry, so reruns repeat bits.
//
// Measured on one core of a Xeon with AMX-BF16 (docs/benchmarks.md, "Seed
// CNN in bf16", 2026-12-02; `conv_algo_times --precision bf16 --against
// auto`, batch 64, the bf16 conversions included): AMX won every pass on
// output maps of 8×8 and more with 64+ channels (64→64 16×16: 1.4 / 1.8 /
// 2.7 ms forward / input gradient / weight gradient against Winograd's 6.3 /
// 4.8 / 6.9), the forward pass down to 4×4 maps (256→256: 1.8 against 4.0),
// and nothing on 2×2 maps (512→512: 12.5 / 12.4 / 27.6 against small-map's
// 5.6 / 3.4 / 5.7): its tiles take 16 pixel rows at a time. Its weight
// gradient needs channels to fill a tile's rows: with 10 (the seed CNN's
// second convolution) it lost (0.47 against our direct kernels' 0.35 ms),
// while the forward pass and input gradient won 2× there. 1×1 convolutions
// (ResNet's downsampling) stay fp32: they lost both backward passes to
// oneDNN's fp32 kernels (64→128 to 8×8: 0.98 / 1.13 ms against 0.64 / 0.54)
// and, on two threads inside ResNet-18's step, the forward pass too (0.65
// against 0.47 ms: converting their input costs as much as they multiply).
// The 3-channel 7×7 stem lost its weight gradient (11.8 against 9.9 ms).
#include "backends/cpu/planar_conv.h"

namespace convoy::cpu {

inline ConvPasses amx_passes(const ConvGeometry& g) {
  const int64_t pixels = g.out_height * g.out_width;
  if (g.kernel == 1) return {};
  return {.forward = pixels >= 16, .input_gradient = pixels >= 64, .weight_gradient = pixels >= 64 && g.channels >= 32};
}

}  // namespace convoy::cpu
