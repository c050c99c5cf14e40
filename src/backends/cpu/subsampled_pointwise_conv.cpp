#include "backends/cpu/subsampled_pointwise_conv.h"

#include <omp.h>

#include <algorithm>
#include <stdexcept>

#include "backends/cpu/sgemm.h"

namespace convoy::cpu {

bool SubsampledPointwiseConv::suits(const ConvGeometry& g) {
  return g.kernel == 1 && g.stride >= 2 && g.groups == 1 && g.pad_top == 0 && g.pad_left == 0 &&
         g.out_height == (g.height - 1) / g.stride + 1 && g.out_width == (g.width - 1) / g.stride + 1;
}

bool SubsampledPointwiseConv::chosen(const ConvGeometry& g, ConvAlgo algo) {
  return algo == ConvAlgo::automatic && suits(g) && g.channels >= 32 && g.filters >= 32;
}

SubsampledPointwiseConv::SubsampledPointwiseConv(const ConvGeometry& g, ConvPasses passes)
    : g_(g),
      passes_(passes),
      threads_(omp_get_max_threads()),
      block_rows_((std::max(kBlockPixels, kBlockFloats / g.channels) + g.out_width - 1) / g.out_width),
      rows_(g.batch * g.out_height) {
  if (!suits(g)) throw std::logic_error("SubsampledPointwiseConv built for a convolution it does not suit");
}

std::size_t SubsampledPointwiseConv::scratchpad_bytes() const {
  const int64_t blocks = threads_ * block_rows_ * g_.out_width * g_.channels;  // the forward's and input gradient's
  const int64_t all = rows_ * g_.out_width * g_.channels;                      // the weight gradient's Xs
  return static_cast<std::size_t>(std::max(blocks, all)) * sizeof(float);
}

void SubsampledPointwiseConv::gather(const float* src, int64_t row0, int64_t row1, float* to) const {
  const int64_t C = g_.channels, s = g_.stride, Wo = g_.out_width;
  for (int64_t r = row0; r < row1; ++r) {
    const int64_t n = r / g_.out_height, iy = r % g_.out_height * s;
    const float* x = src + ((n * g_.height + iy) * g_.width) * C;
    for (int64_t ox = 0; ox < Wo; ++ox, to += C) std::copy(x + ox * s * C, x + ox * s * C + C, to);
  }
}

void SubsampledPointwiseConv::forward(const float* src, const float* weight, const float* bias, float* dst) {
  const int64_t C = g_.channels, O = g_.filters, Wo = g_.out_width;
  const int64_t blocks = (rows_ + block_rows_ - 1) / block_rows_;
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t row0 = b * block_rows_, row1 = std::min(rows_, row0 + block_rows_);
    const int64_t pixels = (row1 - row0) * Wo;
    float* xs = scratch_ + omp_get_thread_num() * block_rows_ * Wo * C;
    gather(src, row0, row1, xs);
    float* y = dst + row0 * Wo * O;
    if (bias)
      for (int64_t p = 0; p < pixels; ++p) std::copy(bias, bias + O, y + p * O);
    sgemm('N', 'T', pixels, O, C, xs, C, weight, C, y, O, bias ? 1.0f : 0.0f);
  }
}

void SubsampledPointwiseConv::input_gradient(const float* diff_dst, const float* weight, float* diff_src) {
  const int64_t C = g_.channels, O = g_.filters, Wo = g_.out_width, Ho = g_.out_height, s = g_.stride;
  const int64_t W = g_.width, row_floats = W * C;
  const int64_t blocks = (rows_ + block_rows_ - 1) / block_rows_;
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t row0 = b * block_rows_, row1 = std::min(rows_, row0 + block_rows_);
    float* dxs = scratch_ + omp_get_thread_num() * block_rows_ * Wo * C;
    sgemm('N', 'N', (row1 - row0) * Wo, C, O, diff_dst + row0 * Wo * O, O, weight, C, dxs, C);
    // Output row (n, oy) owns input rows [oy·s, (oy + 1)·s), the last one
    // of an image every row to the bottom; only row oy·s's pixels ox·s get
    // a gradient.
    for (int64_t r = row0; r < row1; ++r) {
      const int64_t n = r / Ho, oy = r % Ho, iy0 = oy * s, iy1 = oy + 1 == Ho ? g_.height : iy0 + s;
      float* dx = diff_src + (n * g_.height + iy0) * row_floats;
      std::fill(dx, dx + row_floats, 0.0f);
      const float* from = dxs + (r - row0) * Wo * C;
      for (int64_t ox = 0; ox < Wo; ++ox) std::copy(from + ox * C, from + ox * C + C, dx + ox * s * C);
      std::fill(dx + row_floats, dx + (iy1 - iy0) * row_floats, 0.0f);
    }
  }
}

void SubsampledPointwiseConv::weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) {
  const int64_t C = g_.channels, O = g_.filters, M = rows_ * g_.out_width;
  float* xs = scratch_;
#pragma omp parallel num_threads(threads_)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    gather(src, share(rows_, t, nt), share(rows_, t + 1, nt), xs + share(rows_, t, nt) * g_.out_width * C);
#pragma omp barrier
    // The filters on 16-float (cache-line) bounds, so that no two threads
    // write one line of dW; each sum runs over all M rows in one order.
    const int64_t o0 = line_share(O, t, nt), o1 = line_share(O, t + 1, nt);
    if (o0 < o1) {
      sgemm('T', 'N', o1 - o0, C, M, diff_dst + o0, O, xs, C, dw + o0 * C, C);
      if (db) {
        std::fill(db + o0, db + o1, 0.0f);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t o = o0; o < o1; ++o) db[o] += diff_dst[m * O + o];
      }
    }
  }
}

}  // namespace convoy::cpu
