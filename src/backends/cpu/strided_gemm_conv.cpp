#include "backends/cpu/strided_gemm_conv.h"

#include <omp.h>

#include <algorithm>
#include <stdexcept>

#include "backends/cpu/sgemm.h"
#include "backends/cpu/tap_order.h"

namespace convoy::cpu {

bool StridedGemmConv::suits(const ConvGeometry& g) {
  return g.kernel >= 1 && g.stride >= 2 && g.groups == 1 && g.pad_top >= 0 && g.pad_left >= 0 &&
         g.pad_top < g.kernel && g.pad_left < g.kernel && g.out_height >= 1 && g.out_width >= 1;
}

bool StridedGemmConv::chosen(const ConvGeometry& g, ConvAlgo algo) {
  if (algo != ConvAlgo::automatic || !suits(g) || g.channels < 32 || g.filters < 32) return false;
  if (g.kernel == 1) return g.pad_top == 0 && g.pad_left == 0;
  return g.out_height * g.out_width > 4;
}

namespace {

// g, once it suits: the constructor's arithmetic divides by its sizes.
const ConvGeometry& suited(const ConvGeometry& g) {
  if (!StridedGemmConv::suits(g)) throw std::logic_error("StridedGemmConv built for a convolution it does not suit");
  return g;
}

}  // namespace

StridedGemmConv::StridedGemmConv(const ConvGeometry& g, ConvPasses passes)
    : g_(suited(g)),
      passes_(passes),
      threads_(omp_get_max_threads()),
      taps_(g.kernel * g.kernel),
      patch_(g.kernel * g.kernel * g.channels),
      block_rows_((std::max(kBlockPixels, kBlockFloats / patch_) + g.out_width - 1) / g.out_width),
      rows_(g.batch * g.out_height) {
  // Blocks phases_ apart read disjoint input rows: block b's last output
  // row reads up to input row ((b + 1)·R − 1)·s − pad + k − 1, block b + φ's
  // first from (b + φ)·R·s − pad, so k − 1 < ((φ − 1)·R + 1)·s.
  // (One phase where k ≤ s: then no two blocks share an input row.)
  phases_ = 1;
  while (g.kernel - 1 >= ((phases_ - 1) * block_rows_ + 1) * g.stride) ++phases_;
  if (taps_ > 1) {
    wr_.resize(static_cast<std::size_t>(g.filters * patch_));
    if (passes.weight_gradient) dwr_.resize(static_cast<std::size_t>(g.filters * patch_));
  }
}

std::size_t StridedGemmConv::scratchpad_bytes() const {
  const int64_t blocks = threads_ * block_rows_ * g_.out_width * patch_;  // a block's Xp or dXp per thread
  const int64_t all = rows_ * g_.out_width * patch_;                      // the weight gradient's Xp, all of it
  return static_cast<std::size_t>(passes_.weight_gradient ? std::max(blocks, all) : blocks) * sizeof(float);
}

void StridedGemmConv::prepare(const float* w) {
  if (taps_ == 1) return;
  const int64_t C = g_.channels;
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t o = 0; o < g_.filters; ++o) taps_outward(w + o * C * taps_, wr_.data() + o * patch_, C, taps_);
}

void StridedGemmConv::gather(const float* src, int64_t row0, int64_t row1, float* to) const {
  const int64_t C = g_.channels, k = g_.kernel, s = g_.stride, H = g_.height, W = g_.width;
  for (int64_t r = row0; r < row1; ++r) {
    const int64_t n = r / g_.out_height, oy = r % g_.out_height;
    for (int64_t ox = 0; ox < g_.out_width; ++ox)
      for (int64_t ky = 0; ky < k; ++ky) {
        const int64_t iy = oy * s + ky - g_.pad_top;
        for (int64_t kx = 0; kx < k; ++kx, to += C) {
          const int64_t ix = ox * s + kx - g_.pad_left;
          if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
            std::fill(to, to + C, 0.0f);
          } else {
            const float* x = src + ((n * H + iy) * W + ix) * C;
            std::copy(x, x + C, to);
          }
        }
      }
  }
}

void StridedGemmConv::forward(const float* src, const float* weight, const float* bias, float* dst) {
  const int64_t O = g_.filters, P = patch_, Wo = g_.out_width;
  const int64_t blocks = (rows_ + block_rows_ - 1) / block_rows_;
  const float* wr = patch_weights(weight);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t row0 = b * block_rows_, row1 = std::min(rows_, row0 + block_rows_);
    const int64_t pixels = (row1 - row0) * Wo;
    float* xp = scratch_ + omp_get_thread_num() * block_rows_ * Wo * P;
    gather(src, row0, row1, xp);
    float* y = dst + row0 * Wo * O;
    if (bias)
      for (int64_t p = 0; p < pixels; ++p) std::copy(bias, bias + O, y + p * O);
    sgemm('N', 'T', pixels, O, P, xp, P, wr, P, y, O, bias ? 1.0f : 0.0f);
  }
}

void StridedGemmConv::add_patches(const float* dxp, int64_t row0, int64_t row1, float* diff_src) const {
  const int64_t C = g_.channels, k = g_.kernel, s = g_.stride, H = g_.height, W = g_.width;
  const int64_t Wo = g_.out_width, P = patch_;
  for (int64_t r = row0; r < row1; ++r) {
    const int64_t n = r / g_.out_height, oy = r % g_.out_height;
    for (int64_t ox = 0; ox < Wo; ++ox, dxp += P)
      for (int64_t ky = 0; ky < k; ++ky) {
        const int64_t iy = oy * s + ky - g_.pad_top;
        if (iy < 0 || iy >= H) continue;
        for (int64_t kx = 0; kx < k; ++kx) {
          const int64_t ix = ox * s + kx - g_.pad_left;
          if (ix < 0 || ix >= W) continue;
          const float* from = dxp + (ky * k + kx) * C;
          float* to = diff_src + ((n * H + iy) * W + ix) * C;
          for (int64_t c = 0; c < C; ++c) to[c] += from[c];
        }
      }
  }
}

void StridedGemmConv::input_gradient(const float* diff_dst, const float* weight, float* diff_src) {
  const int64_t O = g_.filters, P = patch_, Wo = g_.out_width, size = g_.batch * g_.height * g_.width * g_.channels;
  const int64_t blocks = (rows_ + block_rows_ - 1) / block_rows_;
  const float* wr = patch_weights(weight);
#pragma omp parallel num_threads(threads_)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    // (The first phase's barrier: all of dX is zero before any block adds.)
    std::fill(diff_src + share(size, t, nt), diff_src + share(size, t + 1, nt), 0.0f);
    float* dxp = scratch_ + t * block_rows_ * Wo * P;
    // Phase by phase, the blocks b ≡ phase (mod phases_) each a GEMM into
    // the thread's part of the scratchpad (in its L2), added at once into
    // dX: blocks of one phase read no input row in common, so no two
    // threads add into one pixel, and each pixel's entries are added in
    // one order (by phase, then output pixel and tap) on any thread count.
    for (int64_t phase = 0; phase < phases_; ++phase) {
#pragma omp barrier
#pragma omp for schedule(static)
      for (int64_t b = phase; b < blocks; b += phases_) {
        const int64_t row0 = b * block_rows_, row1 = std::min(rows_, row0 + block_rows_);
        sgemm('N', 'N', (row1 - row0) * Wo, P, O, diff_dst + row0 * Wo * O, O, wr, P, dxp, P);
        add_patches(dxp, row0, row1, diff_src);
      }
    }
  }
}

void StridedGemmConv::weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) {
  const int64_t C = g_.channels, O = g_.filters, P = patch_, M = rows_ * g_.out_width;
  float* xp = scratch_;
  float* dwr = taps_ == 1 ? dw : dwr_.data();
#pragma omp parallel num_threads(threads_)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    gather(src, share(rows_, t, nt), share(rows_, t + 1, nt), xp + share(rows_, t, nt) * g_.out_width * P);
  }
  // Filters in fixed chunks (sgemm.h: the rows of a GEMM never split in
  // shares), each sum all M rows deep in one order.
  over_row_chunks(threads_, O, [&](int64_t o0, int64_t o1) {
    sgemm('T', 'N', o1 - o0, P, M, diff_dst + o0, O, xp, P, dwr + o0 * P, P);
    if (taps_ > 1)
      for (int64_t o = o0; o < o1; ++o) taps_inward(dwr + o * P, dw + o * C * taps_, C, taps_);
    if (db) bias_gradient(diff_dst, M, O, o0, o1, db);
  });
}

}  // namespace convoy::cpu
