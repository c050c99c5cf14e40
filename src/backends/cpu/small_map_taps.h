#pragma once
// Kernels for 3×3 stride-1 pad-1 convolutions on 2×2 maps (ResNet-18's
// layer4 on 64×64 images: three 512→512 convs), reading PyTorch's weight
// layout W[o][c][3][3] directly in all three passes; the weight gradient
// also for 3×3 stride-2 pad-1 ones from 4×4 maps to 2×2 (its
// layer4.0.conv1, 256→512), where each output pixel p = (py, px) sees input
// pixel q = (qy, qx) through tap (qy − 2·py + 1, qx − 2·px + 1) when both
// lie in [0, 3): 25 (p, q) pairs of 64. (Their forward and input gradient
// stay GEMMs: as sums here, each input feeds 1.6 multiply-adds, not 4, and
// they were no faster; docs/benchmarks.md, session 20 "rn8".) `side` names
// the input map: 2 or 4.
//
// Why: SmallMapConv's GEMMs need the weights with the taps outermost,
// Wr[o][tap][c], reordered from W each step and the weight gradient's dWr
// back into dW: ~1.8 ms per 512→512 conv per core per step (the 9.4 MiB
// weights are past the L2), and the forward GEMMs read Wr transposed at
// ~140 GFLOP/s (docs/benchmarks.md, "rn5"). On a 2×2 map every (output
// pixel p, input pixel q) pair is one tap, tap(p, q) = (qy − py + 1)·3 +
// (qx − px + 1): 16 of the 36 (pixel, tap) products are inside the image.
// With the batch in the vector lanes, one weight W[o][c][·] (nine floats in
// a row) feeds 16·N multiply-adds, so the kernels broadcast it from where
// PyTorch keeps it and stream the weights once per pass:
//   forward:         Yᵀ[o][p][n]  = b[o] + Σ_c Σ_q W[o][c][tap(p, q)] · Xᵀ[q][c][n]
//   input gradient:  dXᵀ[c][q][n] = Σ_o Σ_p W[o][c][tap(p, q)] · dYᵀ[p][o][n]
// (the activations, small, packed with the batch innermost), and the weight
// gradient with the channels in the lanes, nine sums per (filter, channel
// vector), written straight into dW[o][c][·]:
//   weights:         dW[o][c][tap] = Σ_n Σ_{(p, q): tap(p, q) = tap} dY[n][p][o] · X[n][q][c]
//
// Deterministic on any thread count: the forward and the weight gradient
// split the filters over the threads, the input gradient the channels, and
// every element's sum runs in one order on every share (channels or filters
// ascending, then pixels; the weight gradient over the images, then pixels).
//   x [N][side²][C], dy and y [N][4][O] (NHWC); w and dw [O][C][3][3]
#include <cstdint>

namespace convoy::cpu::taps2x2 {

// The batch rounded up to whole vectors: the packed activations' rows.
int64_t padded_batch(int64_t batch);

// to[q][k][n] = from[n][q][k] for k in [k0, k1) (n up to `batch`, zeros up
// to padded_batch(batch)): a thread's share of the packing.
void pack(const float* from, int64_t batch, int64_t K, int64_t k0, int64_t k1, float* to);

// The forward (input_gradient false) or input-gradient sums for rows
// [r0, r1) of R (filters, or channels for the input gradient) over all K
// (channels, or filters) of `in` (pack()'s [4][K][padded batch]): out[n][s][r]
// = (bias ? bias[r] : 0) + Σ_k Σ_t W(r, k, s, t) · in[t][k][n]. `sums`,
// [R][4][padded batch] floats, holds the running sums between blocks of k.
// w is W[O][C][3][3] with C channels.
void sums(const float* w, int64_t C, bool input_gradient, const float* in, int64_t K, int64_t batch, int64_t r0,
          int64_t r1, const float* bias, float* sums, float* out, int64_t R);

// The weight gradient's packed inputs: channel vectors (the lanes) and
// groups of 16 filters, each [batch][pixels][its width] in a row (the
// NHWC rows are 4·C floats apart, a multiple of 4 KiB for C = 512, which
// put a vector's 256 rows in two sets of the L1).
int64_t channel_vectors(int64_t C);
int64_t filter_groups(int64_t O);
// xs[v] for channel vectors [v0, v1) (the input map's side² pixels), ds[g]
// for filter groups [g0, g1) (the output's 4).
void pack_channels(const float* x, int64_t batch, int64_t pixels, int64_t C, int64_t v0, int64_t v1, float* xs);
void pack_filters(const float* dy, int64_t batch, int64_t O, int64_t g0, int64_t g1, float* ds);
// dw[o] for o in [o0, o1) (every channel's nine taps), overwritten; o0 on a
// group's first filter.
void weight_gradient(int side, const float* xs, const float* ds, int64_t batch, int64_t C, int64_t o0, int64_t o1,
                     float* dw);

}  // namespace convoy::cpu::taps2x2
