#pragma once
// Convolutions whose output maps are tiny (at most kMaxPixels pixels per
// image: ResNet-18's last two stages on 64×64 inputs have 4×4 and 2×2 maps),
// all three passes as GEMMs over the batch, one per (output pixel, kernel
// row), run by oneDNN's sgemm.
//
// Why: oneDNN 2.6's direct kernels block over output pixels, and a 2×2 map
// leaves them almost nothing to block: on one AVX-512 core ResNet-18's
// layer4.0.conv1 (256→512, 3×3 stride 2, 4×4 → 2×2, batch 64) took 14.7 ms
// forward and 24 ms backward, ~40 GFLOP/s and a tenth of the whole step
// (here: 4.6 and 7.4); layer3.0.conv1 (128→256, stride 2, 8×8 → 4×4) 4.6
// and 10.8 (here: 4.2 and 7.4). Its 3×3 stride-1 512→512 convolutions on
// 2×2 maps took 27 and 40 ms; Winograd 7.6 and 11.4 (here: 6.9 and 10.5).
// With 64 pixels (layer2.0.conv1, 16×16 → 8×8) it no longer won (13.1 ms
// to oneDNN's 12.8), nor against Winograd on 4×4 maps (20 to 14.6 ms), whose
// tiles there still save multiplications: see chosen().
//
// Output pixel p = (oy, ox) of image n sees, through kernel row ky, the
// input row iy = oy·s − pad_top + ky; the taps kx of that row that land
// inside the image, [kx0, kx1], read the input pixels [ix0 + kx0, ix0 + kx1]
// (ix0 = ox·s − pad_left), which in NHWC are one run of K = (kx1 − kx0 + 1)·C
// floats per image, H·W·C floats apart from image to image. With the weights
// reordered once per step to Wr[O][k][k][C] (taps in (ky, kx, c) order), the
// same taps are one run of K floats in each row of Wr too. So, for each
// (p, ky) with iy inside the image, over the batch as the GEMM's rows:
//   forward:        Y[:, p, :] (N×O)  += X_run (N×K) · Wr[:, run]ᵀ
//   input gradient: dX_run (N×K)      += dY[:, p, :] (N×O) · Wr[:, run]
//   weights:        dWr[:, run] (O×K) += dY[:, p, :]ᵀ (O×N) · X_run (N×K)
// except for weights of kGatherWeights floats or more, where the weight
// gradient runs one GEMM per tap j = (ky, kx) over every (image, output
// pixel) that sees it, its rows gathered once per pass into X_j (the input
// pixels) and dY_j (the output gradients):
//   weights:        dWr[:, j] (O×C) = dY_jᵀ (O×M_j) · X_j (M_j×C)
// so that each gradient element is written once, its sum M_j = N·(pixels
// that see tap j) deep, where the per-run GEMMs read and wrote all of dWr
// (9 MiB for 512→512, past the L2) once per GEMM.
// Taps over the padding are never multiplied (a 2×2 map with 3×3 pad 1 uses
// 16 of 36 per image, as few as Winograd F(2×2, 3×3)); dW[o][c][ky][kx] =
// dWr[o][(ky·k + kx)·C + c] and db[o] = Σ dY[·, ·, o].
//
// 3×3 stride-1 pad-1 convolutions on 2×2 maps (ResNet-18's layer4) take
// none of this: small_map_taps.h's kernels read W[o][c][3][3] directly, with
// no reorder either way (taps2x2()); 3×3 stride-2 pad-1 ones from 4×4 maps
// to 2×2 (its layer4.0.conv1) take their weight gradient there, written
// straight into dW (weight_taps()).
//
// Deterministic on any thread count: the forward pass and the weight
// gradient split the filters over the threads, the input gradient the
// channels (one GEMM per tap there), and every element's sum runs over the
// pixels, then kernel rows (forward, input gradient) or over the gathered
// rows (weight gradient), in the same order on every share. (Splitting into
// fixed 128-wide blocks instead, so that the GEMMs' shapes too would not
// depend on the threads, cost the input gradient a tenth on one thread;
// test_cpu_kernels checks the bits on 1 and 2 threads, 384 rows deep.)
//   src [N, H, W, C], dst and diff_dst [N, Ho, Wo, O] (NHWC);
//   weight and dw [O, C, k, k], bias and db [O] (PyTorch's layouts)
#include <cstddef>
#include <cstdint>
#include <vector>
#include <utility>

#include "backends/cpu/planar_conv.h"
#include "backends/cpu/small_map_taps.h"
#include "backends/cpu/weighted_op.h"
#include "convoy/core/tensor.h"

namespace convoy::cpu {

class SmallMapConv final : public OwnKernels {
 public:
  static constexpr int64_t kMaxPixels = 16;
  // Weights of at least this many floats (8 MiB, 512→512 3×3) take the
  // weight gradient per tap over gathered rows; smaller ones per (pixel,
  // kernel row), summed into dWr, which then stays in the core's 2 MiB L2
  // (ResNet-18's layer3.0.conv1, 1.2 MiB, lost 0.5–1 ms to the gathers).
  static constexpr int64_t kGatherWeights = int64_t{1} << 21;
  // Ungrouped, output maps of at most kMaxPixels pixels.
  static bool suits(const ConvGeometry& g);
  // Whether `auto` runs every pass here: where it suits, channels and
  // filters are both ≥ 32 (fewer leave the GEMMs too thin; direct_conv.h
  // serves the fewest), the kernel is wider than 1×1 and, for Winograd's
  // shapes (3×3, stride 1, pad 1), the maps have at most 4 pixels, where the
  // padding leaves Winograd no fewer multiplications than the taps inside
  // the image. Strided convolutions strided_gemm_conv.h takes (1×1, and
  // wider ones to maps of over 4 pixels) are chosen there first
  // (conv2d_op.cpp). 1×1 convolutions are not taken: the strided ones
  // (ResNet-18's downsampling) run on strided_gemm_conv.h's GEMMs (since
  // session 19, then as subsampled_pointwise_conv.h), and here they gained nothing measurable (layer3.0's 1.6 ms both ways), and MobileNetV2's
  // summed in the new order moved a batch norm's weight gradient to 1.6e-4 of
  // PyTorch's fp64 one, past test_zoo's bound (4× PyTorch's own fp32 error). A fixed rule, as
  // Winograd's, so the bits do not depend on the machine's load. `direct`
  // keeps oneDNN's kernels, `winograd` Winograd's where that suits.
  static bool chosen(const ConvGeometry& g, ConvAlgo algo);
  // 3×3, stride 1, pad 1 on a 2×2 map: every pass on small_map_taps.h's
  // kernels instead of the GEMMs.
  static bool taps2x2(const ConvGeometry& g);
  // taps2x2(), or 3×3, stride 2, pad 1 from a 4×4 map to a 2×2 one: the
  // weight gradient on small_map_taps.h's kernels (no dWr, no reorder back).
  static bool weight_taps(const ConvGeometry& g);

  // passes: those these kernels run (chosen() gives all three; under bf16
  // on AMX some go to oneDNN, amx_passes.h).
  SmallMapConv(const ConvGeometry& g, ConvPasses passes);

  bool runs_forward() const override { return passes_.forward; }
  bool runs_weight_gradient() const override { return passes_.weight_gradient; }
  bool runs_input_gradient() const override { return passes_.input_gradient; }
  std::size_t scratchpad_bytes() const override;
  void set_scratchpad(void* scratchpad) override { scratch_ = static_cast<float*>(scratchpad); }
  void prepare(const float* weight) override;
  void forward(const float* src, const float* weight, const float* bias, float* dst) override;
  void weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) override;
  void input_gradient(const float* diff_dst, const float* weight, float* diff_src) override;

 private:
  // The (output pixel, kernel row) pairs whose row lies inside the image,
  // in the order every sum runs over them.
  struct Run {
    int64_t pixel;   // p = oy · Wo + ox
    int64_t input;   // the run's first input pixel, iy · W + ix0 + kx0
    int64_t tap;     // its first tap, ky · k + kx0
    int64_t taps;    // kx1 − kx0 + 1
  };

  // The pixels that see one tap: rows [first_row, first_row + N·pixels) of
  // the gathered X_j and dY_j, (pixel, image) in that order.
  struct TapRows {
    int64_t first_row = 0;
    std::vector<std::pair<int64_t, int64_t>> pixels;  // (output pixel, input pixel)
  };

  // Rows of `from` ([N][map_pixels][width]) to `to` in tap_rows_' order: the
  // input pixels, or with `outputs` the output pixels, that see each tap.
  // Copies, so any split over the threads gives the same bits.
  // taps2x2_'s forward (from = src, to = dst) or input gradient (diff_dst,
  // diff_src): the activations packed, then the sums.
  void taps2x2_sums(const float* from, const float* weight, const float* bias, bool input_gradient, float* to) const;

  void gather(const float* from, int64_t width, int64_t map_pixels, bool outputs, float* to) const;

  ConvGeometry g_;
  ConvPasses passes_;
  bool taps2x2_;      // taps2x2(g_): no Wr, no GEMMs
  bool weight_taps_;  // weight_taps(g_): the weight gradient without dWr
  int64_t taps_ = 0;  // k · k · C: a row of Wr
  int threads_;       // fixed at construction, as the splits
  std::vector<Run> runs_;
  std::vector<TapRows> tap_rows_;  // k · k of them
  int64_t gathered_rows_ = 0;      // Σ N · pixels over the taps
  AlignedBuffer wr_;  // Wr[O][k][k][C], from the latest prepare() (not for taps2x2_)
  // The weight gradient's dWr, X_j and dY_j, or for weight_taps_ its packed
  // rows; for taps2x2_ also the packed activations and the sums of the
  // forward or input gradient.
  float* scratch_ = nullptr;
};

}  // namespace convoy::cpu
