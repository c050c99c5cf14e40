#pragma once
// Winograd F(2×2, 3×3) and F(4×4, 3×3) for 3×3, stride-1, pad-1, ungrouped
// convolutions: the forward pass, the gradient with respect to the input and
// the weight gradient, each on 2.25× (F(2×2)) or 4× (F(4×4)) fewer
// multiplications than a direct convolution.
//
// Why: ResNet-18's 3×3 convolutions are ~85% of its FLOPs, and oneDNN 2.6's
// direct kernels ran them at ~81 GFLOP/s of the ~167 its sgemm reaches on two
// AVX2 cores (layer4's backward, 2×2 maps, ~45). Winograd turns them into
// (m + 2)² GEMMs per pass, run by oneDNN's sgemm, plus cheap transforms.
//
// Each image is cut into m×m output tiles, m = 2 or 4 (the last row and
// column of tiles clipped where m does not divide the size); tile t reads the
// (m + 2)² input patch at (m·ty - 1, m·tx - 1). With B, G, A the F(m, 3)
// matrices (winograd_transforms.h), for each of the P = (m + 2)² positions k
// of a transformed tile:
//   forward:  V = Bᵀ d B per tile into V[k][tiles][C]; U = G g Gᵀ per (o, c)
//             into U[k][O][C]; M[k] = V[k] · U[k]ᵀ; Y = Aᵀ M A per tile.
//   input gradient: a forward of dY with the weights turned 180° and C, O
//             swapped. Its transformed weights are U itself, transposed:
//             turning the kernel maps each interpolation point p to 1/p, so
//             with the transforms B', A' of the points 1/p (and, for F(2×2),
//             whose points are their own inverses but for 0 ↔ ∞, k's rows
//             and columns 0 ↔ 3 swapped) U serves both passes.
//   weights:  V as forward; Z = A dY Aᵀ per tile (m×m → P); S[k] = Z[k]ᵀ ·
//             V[k] summed over all tiles; dW = Gᵀ S G per (o, c).
// (The last is the forward's chain rule: Y = Aᵀ(U ⊙ V)A gives ∂U = A dY Aᵀ ⊙ V
// per tile and ∂g = Gᵀ ∂U G.)
//
// Which tile (a fixed rule on the shape, not a timing): tile_size() gives
// F(4×4) where it takes fewer multiplications, 36·⌈H/4⌉⌈W/4⌉ < 16·⌈H/2⌉⌈W/2⌉
// (maps of 3×3, 4×4 and from 7 up), F(2×2) on ties (5, 6) and below; forced
// `winograd` runs that. Measured with bench/conv_algo_times (batch 64, one
// thread, fwd + input grad + weight grad): 64→64 at 16×16 21.1 → 14.0 ms,
// 128→128 at 8×8 16.6 → 10.9, 256→256 at 4×4 14.1 → 10.4; at 6×6 and 5×5
// (the ties) F(4×4) was ~10% slower. `automatic` runs the same tiles (where
// its channel rule takes Winograd). Until 2026-12-03 its forward pass kept
// F(2×2) on maps over 4×4: F(4×4) moves the logits ~2.5× further from fp64's
// (5.6e-6 against 2.2e-6 on the PJRT parity test's ResNet-18, batch 8;
// oneDNN's direct kernels 2.9e-6, XLA 2.5e-6), which put the zoo's ResNet-50
// (2 images, training mode, ill-conditioned) 1.3e-4 from PyTorch's fp32
// logits; it is 1.2e-4 from fp64's there, where PyTorch's own fp32 is 6.1e-5,
// and test_zoo now holds the logits, as the gradients, to fp64 within 4×
// PyTorch's fp32 error. F(4×4) forward saves ~3% of a 2-thread ResNet-18 step
// (docs/benchmarks.md, 2026-12-03).
// Numerics: F(4×4)'s transforms have larger constants (up to 8, and 1/15 in
// G), so the GEMMs' fp32 sums, made on larger transformed values, round more:
// ~3e-6 of the largest output on random 64-channel tiles against F(2×2)'s
// 4e-7 (docs/benchmarks.md).
//
// Transforms run over channels in NHWC (contiguous, vectorised), tiles split
// over the OpenMP threads; the P GEMMs are split over the threads by k, each
// a single-threaded sgemm over all tiles, so every sum has one fixed order and
// results are bit-identical for a thread count (the forward pass and the
// input gradient for any thread count; the weight gradient's blocks and the
// bias sums are per thread). When all tiles' V and M pass
// 8 MiB (big maps), the forward and input gradient instead run each thread's
// tiles in blocks of ~512 KiB: transform, P GEMMs, inverse transform (as
// fast here, and the workspace stays small); so does the weight
// gradient while each thread's own P O×C sums are small (< 1 MiB), which
// are then added in thread order. Workspace (V, M,
// Z, S) is the op's scratchpad; U is kept by the op from the forward pass to
// the backward. In each, the matrix of position k + 1 starts 16 floats past
// the end of k's (winograd_conv.cpp kSkew: off one cache set).
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

struct WinogradPasses : ConvPasses {
  // m: F(2×2, 3×3) or F(4×4, 3×3), of every pass run here.
  int tile = 2;
};

class WinogradConv final : public OwnKernels {
 public:
  // 3×3, stride 1, padding 1 on every side, groups 1.
  static bool suits(const ConvGeometry& g) {
    return g.kernel == 3 && g.stride == 1 && g.groups == 1 && g.pad_top == 1 && g.pad_left == 1 &&
           g.out_height == g.height && g.out_width == g.width;
  }
  // The passes to run here for `g` under `algo` (none when it does not suit),
  // on tile_size(g)'s tile.
  // (Inline: one rule for every kernel copy, and the tests read it.)
  static WinogradPasses passes(const ConvGeometry& g, ConvAlgo algo) {
    if (algo == ConvAlgo::direct || !suits(g)) return {};
    const int fewest = tile_size(g);
    if (algo == ConvAlgo::winograd) return {{true, true, true}, fewest};
    // automatic: where it won every pass on one AVX2 core (bench/conv_algo_times,
    // docs/architecture.md): 32→64 and wider. At 32→32 it tied, below it lost
    // (each tile's transforms cost as much as its few multiply-adds).
    const bool wide = g.channels >= 32 && g.filters >= 32 && g.channels * g.filters >= 32 * 64;
    return {{wide, wide, wide}, fewest};
  }
  // The tile's side m with the fewest multiplications: 4 (F(4×4, 3×3)) where
  // it takes fewer than F(2×2, 3×3), else 2.
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
  int tile_;       // m: the outputs of a tile's side, 2 or 4, of every pass run here
  int positions_;  // (m + 2)²: of a transformed tile
  int64_t tiles_y_, tiles_x_, tiles_;  // per image, per image, in the batch
  int threads_;                        // fixed at construction: the scratchpad's per-thread parts
  int64_t block_ = 0;                  // tiles per block of the forward passes; 0: all tiles at once
  int64_t grad_block_ = 0;             // ... of the weight gradient
  AlignedBuffer u_;                    // U[positions][O][C] (positions kSkew apart), from the latest prepare()
  AlignedBuffer zeros_;                // max(C, O) zeros: a patch's pixels outside the image
  float* scratch_ = nullptr;
};

}  // namespace convoy::cpu
