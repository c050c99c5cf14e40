#pragma once
// 1×1 convolutions with a stride of 2 or more and no padding (ResNet's
// downsampling shortcuts), all three passes as plain GEMMs over the
// subsampled pixels, run by oneDNN's sgemm.
//
// Why: such a convolution is a GEMM on every s-th pixel of every s-th row,
// but oneDNN 2.6's 1×1 kernels ran ResNet-18's three at 150–240 GFLOP/s on
// two AVX-512 cores (sgemm: ~420; docs/benchmarks.md, session 19 rn6), ~3.6 ms
// of a step over their three passes.
//
// With M = N·Ho·Wo output pixels, Xs [M][C] the input pixels they read
// (pixel (oy, ox) of image n reads (oy·s, ox·s)), W [O][C] (PyTorch's
// [O][C][1][1]) and Y, dY [M][O] (NHWC):
//   forward:        Y  = Xs · Wᵀ (+ bias)
//   input gradient: dXs = dY · W, scattered to the pixels Xs came from; every
//                   other pixel of dX is 0
//   weights:        dW = dYᵀ · Xs, db = Σ dY over the rows
// The forward pass and the input gradient run in blocks of whole output rows
// (see kBlockPixels), each block one GEMM of
// the same shape on any thread count; Xs is gathered per block into the
// thread's part of the scratchpad and dXs scattered from it, the block then
// writing every pixel of its input rows (no separate zeroing pass). The
// weight gradient gathers all of Xs once and splits the filters over the
// threads on cache-line bounds, each sum the whole M deep in one order. So
// the bits do not depend on the thread count (test_cpu_kernels checks them
// on 1 and 2 threads).
//   src [N, H, W, C], dst and diff_dst [N, Ho, Wo, O] (NHWC);
//   weight and dw [O, C, 1, 1], bias and db [O] (PyTorch's layouts)
#include <cstddef>
#include <cstdint>

#include "backends/cpu/planar_conv.h"
#include "backends/cpu/weighted_op.h"

namespace convoy::cpu {

class SubsampledPointwiseConv final : public OwnKernels {
 public:
  // Output pixels per block of the forward pass and the input gradient: at
  // least kBlockPixels and kBlockFloats / C (Xs's block ~128 KiB: fewer,
  // deeper GEMMs where C is small), rounded up to whole output rows; a
  // fixed rule of the shape, not of the threads.
  static constexpr int64_t kBlockPixels = 128, kBlockFloats = 32768;
  // 1×1, stride ≥ 2, no padding, groups 1.
  static bool suits(const ConvGeometry& g);
  // Whether `automatic` runs every pass here: where it suits and channels
  // and filters are both ≥ 32. Stride-1 1×1 convolutions stay oneDNN's (a
  // plain GEMM there already; MobileNetV2's, summed in another order, moved
  // a weight gradient past test_zoo's bound: small_map_conv.h).
  static bool chosen(const ConvGeometry& g, ConvAlgo algo);

  SubsampledPointwiseConv(const ConvGeometry& g, ConvPasses passes);

  bool runs_forward() const override { return passes_.forward; }
  bool runs_weight_gradient() const override { return passes_.weight_gradient; }
  bool runs_input_gradient() const override { return passes_.input_gradient; }
  std::size_t scratchpad_bytes() const override;
  void set_scratchpad(void* scratchpad) override { scratch_ = static_cast<float*>(scratchpad); }
  void forward(const float* src, const float* weight, const float* bias, float* dst) override;
  void weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) override;
  void input_gradient(const float* diff_dst, const float* weight, float* diff_src) override;

 private:
  // Xs's rows for output rows [row0, row1) (row = n · Ho + oy) into `to`.
  void gather(const float* src, int64_t row0, int64_t row1, float* to) const;

  ConvGeometry g_;
  ConvPasses passes_;
  int threads_;           // fixed at construction: the scratchpad's per-thread parts
  int64_t block_rows_;    // output rows per block
  int64_t rows_;          // N · Ho
  float* scratch_ = nullptr;
};

}  // namespace convoy::cpu
