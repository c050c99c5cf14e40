#pragma once
// Winograd F(2×2, 3×3) for 3×3, stride-1, pad-1, ungrouped convolutions: the
// forward pass, the gradient with respect to the input and the weight
// gradient, each on 2.25× fewer multiplications than a direct convolution.
//
// Why: ResNet-18's 3×3 convolutions are ~85% of its FLOPs, and oneDNN 2.6's
// direct kernels ran them at ~81 GFLOP/s of the ~167 its sgemm reaches on two
// AVX2 cores (layer4's backward, 2×2 maps, ~45). Winograd turns them into 16
// GEMMs per pass, run by oneDNN's sgemm, plus cheap transforms.
//
// Each image is cut into 2×2 output tiles (the last row and column of tiles
// clipped on odd sizes); tile t reads the 4×4 input patch at (2ty - 1, 2tx - 1).
// With B, G, A the F(2,3) matrices (winograd_conv.cpp), for each of the 16
// positions k of a 4×4 transformed tile:
//   forward:  V = Bᵀ d B per tile into V[k][tiles][C]; U = G g Gᵀ per (o, c)
//             into U[k][O][C]; M[k] = V[k] · U[k]ᵀ; Y = Aᵀ M A per tile.
//   input gradient: a forward of dY with the weights turned 180° and C, O
//             swapped; its transformed weights are U's with k's rows and
//             columns 0 ↔ 3 swapped, transposed, so U serves both passes
//             (M'[k] = V'[k] · U[k] with k's slots swapped).
//   weights:  V as forward; Z = A dY Aᵀ per tile (2×2 → 4×4); S[k] = Z[k]ᵀ ·
//             V[k] summed over all tiles; dW = Gᵀ S G per (o, c).
// (The last is the forward's chain rule: Y = Aᵀ(U ⊙ V)A gives ∂U = A dY Aᵀ ⊙ V
// per tile and ∂g = Gᵀ ∂U G.)
//
// Transforms run over channels in NHWC (contiguous, vectorised), tiles split
// over the OpenMP threads; the 16 GEMMs are split over the threads by k, each
// a single-threaded sgemm over all tiles, so every sum has one fixed order and
// results are bit-identical for a thread count. When all tiles' V and M pass
// 8 MiB (big maps), the forward and input gradient instead run each thread's
// tiles in blocks of ~512 KiB: transform, 16 GEMMs, inverse transform (as
// fast here, and the workspace stays small); so does the weight
// gradient while each thread's own 16 O×C sums are small (≤ 256 KiB), which
// are then added in thread order. Workspace (V, M,
// Z, S) is the op's scratchpad; U is kept by the op from the forward pass to
// the backward.
//
// Which passes run here: see ConvAlgo / WinogradConv::passes().
//   src [N, H, W, C], dst and diff_dst [N, H, W, O] (NHWC);
//   weight and dw [O, C, 3, 3], bias and db [O] (PyTorch's layouts)
#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/cpu/planar_conv.h"
#include "backends/cpu/weighted_op.h"
#include "convoy/core/tensor.h"

namespace convoy::cpu {

// CompileOptions::conv_algo: direct (oneDNN for every pass), winograd
// (Winograd for every pass of every layer it suits) or automatic (default:
// Winograd where it suits and channels and filters are both ≥ 32 with a
// product ≥ 2048 — a fixed rule, measured, not a per-run timing, so that a
// run's arithmetic and its bits do not depend on the machine's load).

struct WinogradPasses {
  bool forward = false, input_gradient = false, weight_gradient = false;
  bool any() const { return forward || input_gradient || weight_gradient; }
};

class WinogradConv final : public OwnKernels {
 public:
  // 3×3, stride 1, padding 1 on every side, groups 1.
  static bool suits(const ConvGeometry& g);
  // The passes to run here for `g` under `algo` (none when it does not suit).
  static WinogradPasses passes(const ConvGeometry& g, ConvAlgo algo);
  // The tile's side m: 4 (F(4×4, 3×3)) where it takes fewer multiplications
  // than F(2×2, 3×3), else 2 (see the header comment).
  static int tile_size(const ConvGeometry& g) {
    auto tiles = [&](int64_t m) { return (g.out_height + m - 1) / m * ((g.out_width + m - 1) / m); };
    return 36 * tiles(4) < 16 * tiles(2) ? 4 : 2;
  }

  WinogradConv(const ConvGeometry& g, WinogradPasses passes);

  bool runs_forward() const override { return passes_.forward; }
  bool runs_weight_gradient() const override { return passes_.weight_gradient; }
  bool runs_input_gradient() const override { return passes_.input_gradient; }
  std::size_t scratchpad_bytes() const override;
  void prepare(const float* weight) override;
  void forward(const float* src, const float* weight, const float* bias, float* dst) override;
  void weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) override;
  void input_gradient(const float* diff_dst, const float* weight, float* diff_src) override;
  void set_scratchpad(void* scratchpad) override { scratch_ = static_cast<float*>(scratchpad); }

 private:
  // dst = the convolution of `in` (in_channels) by U (forward) or by the
  // turned kernels (turned: the input gradient, U transposed).
  void convolve(const float* in, int64_t in_channels, int64_t out_channels, bool turned, const float* bias,
                float* out);

  ConvGeometry g_;
  WinogradPasses passes_;
  int tile_;       // m: the outputs of a tile's side, 2 or 4 (tile_size())
  int positions_;  // (m + 2)²: of a transformed tile
  int64_t tiles_y_, tiles_x_, tiles_;  // per image, per image, in the batch
  int threads_;                        // fixed at construction: the scratchpad's per-thread parts
  int64_t block_ = 0;                  // tiles per block of the forward passes; 0: all tiles at once
  int64_t grad_block_ = 0;             // ... of the weight gradient
  AlignedBuffer u_;                    // U[positions][O][C], from the latest prepare()
  AlignedBuffer zeros_;                // max(C, O) zeros: a patch's pixels outside the image
  float* scratch_ = nullptr;
};

}  // namespace convoy::cpu
