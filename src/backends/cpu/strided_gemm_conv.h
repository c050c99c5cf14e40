#pragma once
// Convolutions with a stride of 2 or more, all three passes as plain GEMMs
// over the output pixels' patches (im2col), run by oneDNN's sgemm: ResNet's
// 1×1 downsampling shortcuts and its 3×3 stride-2 convolutions.
//
// Why: oneDNN 2.6's 1×1 kernels ran ResNet-18's downsampling convolutions at
// 150–240 GFLOP/s on two AVX-512 cores (sgemm: ~420; docs/benchmarks.md,
// session 19 rn6); on AVX2 its 3×3 stride-2 backward passes (layer2.0.conv1)
// and the small-map GEMMs over the batch (layer3.0.conv1, 64-row sgemm calls)
// ran at 95–120 GFLOP/s where one sgemm of the patches runs at ~170 (session
// 21, AMD EPYC).
//
// A patch is an output pixel's k×k taps of every channel, ordered (ky, kx,
// c), zeros where a tap falls in the padding. With M = N·Ho·Wo output
// pixels, P = k·k·C, Xp [M][P] the patches, Wr [O][P] the weights in patch
// order (PyTorch's [O][C][k][k] reordered once a step by prepare(); a 1×1
// kernel's are already in it) and Y, dY [M][O] (NHWC):
//   forward:        Y   = Xp · Wrᵀ (+ bias)
//   input gradient: dXp = dY · Wr, then each input pixel's gradient is the
//                   sum of the patch entries that read it
//   weights:        dWr = dYᵀ · Xp, reordered to dW; db = Σ dY over the rows
// The forward pass runs in blocks of whole output rows (see kBlockPixels),
// each block one GEMM of the same shape on any thread count, its patches
// gathered into the thread's part of the scratchpad. The input gradient's
// GEMMs run in the same blocks, each block's dXp added into dX at once, in
// phases of blocks that share no input row, so every pixel's entries are
// added in one fixed order. The weight gradient gathers all of Xp once and deals
// chunks of 64 filters round the threads (sgemm.h: over_row_chunks; as
// fast as halves on ResNet-18's layer3.0.conv1, 3.7 ms), each sum the
// whole M deep in one order (its scratch holds all N·Ho·Wo·P patches: 9.4
// MiB for ResNet-18's layer2.0.conv1 at 64×64 and batch 64, ~116 MiB at
// 224×224). So the bits do not depend on the thread count
// (test_cpu_kernels checks them on 1 and 2 threads).
//   src [N, H, W, C], dst and diff_dst [N, Ho, Wo, O] (NHWC);
//   weight and dw [O, C, k, k], bias and db [O] (PyTorch's layouts)
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cpu/planar_conv.h"
#include "backends/cpu/weighted_op.h"

namespace convoy::cpu {

class StridedGemmConv final : public OwnKernels {
 public:
  // Output pixels per block of the forward pass and the input gradient: at
  // least kBlockPixels and kBlockFloats / P (a block's patches ~128 KiB:
  // fewer, deeper GEMMs where P is small), rounded up to whole output rows;
  // a fixed rule of the shape, not of the threads.
  static constexpr int64_t kBlockPixels = 128, kBlockFloats = 32768;
  // Stride ≥ 2, groups 1, padding less than the kernel.
  static bool suits(const ConvGeometry& g);
  // Whether `automatic` runs every pass here: where it suits, channels and
  // filters are both ≥ 32, and the kernel is 1×1 without padding, or wider
  // with output maps of more than 4 pixels (maps of at most 4 stay
  // small_map_conv.h's, whose GEMMs and taps kernels skip the padded taps
  // that most of such a map's patches hold). A fixed rule of the shape.
  static bool chosen(const ConvGeometry& g, ConvAlgo algo);

  StridedGemmConv(const ConvGeometry& g, ConvPasses passes);

  bool runs_forward() const override { return passes_.forward; }
  bool runs_weight_gradient() const override { return passes_.weight_gradient; }
  bool runs_input_gradient() const override { return passes_.input_gradient; }
  std::size_t scratchpad_bytes() const override;
  void set_scratchpad(void* scratchpad) override { scratch_ = static_cast<float*>(scratchpad); }
  void prepare(const float* w) override;
  void forward(const float* src, const float* weight, const float* bias, float* dst) override;
  void weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) override;
  void input_gradient(const float* diff_dst, const float* weight, float* diff_src) override;

 private:
  // The patches of output rows [row0, row1) (row = n · Ho + oy) into `to`.
  void gather(const float* src, int64_t row0, int64_t row1, float* to) const;
  // Adds the patch gradients dXp of output rows [row0, row1) into dX.
  void add_patches(const float* dxp, int64_t row0, int64_t row1, float* diff_src) const;
  // Wr for the step: the weights as given for a 1×1 kernel, else wr_.
  const float* patch_weights(const float* weight) const { return taps_ == 1 ? weight : wr_.data(); }

  ConvGeometry g_;
  ConvPasses passes_;
  int threads_;           // fixed at construction: the scratchpad's per-thread parts
  int64_t taps_;          // k · k
  int64_t patch_;         // P = k · k · C
  int64_t block_rows_;    // output rows per block
  int64_t rows_;          // N · Ho
  int64_t phases_;        // the input gradient's: blocks this far apart read disjoint input rows
  std::vector<float> wr_;   // Wr [O][P] (kernels over 1×1)
  std::vector<float> dwr_;  // dWr [O][P] (kernels over 1×1)
  float* scratch_ = nullptr;
};

}  // namespace convoy::cpu
