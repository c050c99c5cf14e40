#include "backends/cpu/small_map_conv.h"

#include <omp.h>

#include <algorithm>
#include <stdexcept>

#include "backends/cpu/sgemm.h"
#include "backends/cpu/simd.h"
#include "backends/cpu/tap_order.h"

namespace convoy::cpu {
namespace {

// fn(begin, end) on each of `threads` threads for its nonempty share of `total`.
template <class Fn>
void over_shares(int threads, int64_t total, Fn&& fn) {
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t begin = line_share(total, t, nt), end = line_share(total, t + 1, nt);
    if (begin < end) fn(begin, end);
  }
}

}  // namespace

bool SmallMapConv::suits(const ConvGeometry& g) {
  return g.groups == 1 && g.out_height * g.out_width <= kMaxPixels;
}

bool SmallMapConv::chosen(const ConvGeometry& g, ConvAlgo algo) {
  if (algo != ConvAlgo::automatic || !suits(g) || g.channels < 32 || g.filters < 32 || g.kernel == 1) return false;
  const bool winograds = g.kernel == 3 && g.stride == 1 && g.pad_top == 1 && g.pad_left == 1 &&
                         g.out_height == g.height && g.out_width == g.width;
  return !winograds || g.out_height * g.out_width <= 4;
}

bool SmallMapConv::taps2x2(const ConvGeometry& g) {
  return g.groups == 1 && g.kernel == 3 && g.stride == 1 && g.pad_top == 1 && g.pad_left == 1 && g.height == 2 &&
         g.width == 2 && g.out_height == 2 && g.out_width == 2;
}

bool SmallMapConv::weight_taps(const ConvGeometry& g) {
  return taps2x2(g) || (g.groups == 1 && g.kernel == 3 && g.stride == 2 && g.pad_top == 1 && g.pad_left == 1 &&
                        g.height == 4 && g.width == 4 && g.out_height == 2 && g.out_width == 2);
}

SmallMapConv::SmallMapConv(const ConvGeometry& g, ConvPasses passes)
    : g_(g),
      passes_(passes),
      taps2x2_(taps2x2(g)),
      weight_taps_(weight_taps(g)),
      taps_(g.kernel * g.kernel * g.channels),
      threads_(omp_get_max_threads()) {
  if (!suits(g)) throw std::logic_error("SmallMapConv built for a convolution it does not suit");
  if (taps2x2_) return;
  const int64_t k = g.kernel;
  for (int64_t oy = 0; oy < g.out_height; ++oy)
    for (int64_t ox = 0; ox < g.out_width; ++ox) {
      const int64_t iy0 = oy * g.stride - g.pad_top, ix0 = ox * g.stride - g.pad_left;
      const int64_t kx0 = std::max<int64_t>(0, -ix0), kx1 = std::min(k, g.width - ix0);  // [kx0, kx1)
      if (kx0 >= kx1) continue;
      for (int64_t ky = 0; ky < k; ++ky) {
        const int64_t iy = iy0 + ky;
        if (iy < 0 || iy >= g.height) continue;
        runs_.push_back({.pixel = oy * g.out_width + ox, .input = iy * g.width + ix0 + kx0, .tap = ky * k + kx0,
                         .taps = kx1 - kx0});
      }
    }
  tap_rows_.resize(static_cast<std::size_t>(k * k));
  for (int64_t oy = 0; oy < g.out_height; ++oy)
    for (int64_t ox = 0; ox < g.out_width; ++ox)
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx) {
          const int64_t iy = oy * g.stride - g.pad_top + ky, ix = ox * g.stride - g.pad_left + kx;
          if (iy >= 0 && iy < g.height && ix >= 0 && ix < g.width)
            tap_rows_[static_cast<std::size_t>(ky * k + kx)].pixels.emplace_back(oy * g.out_width + ox,
                                                                                  iy * g.width + ix);
        }
  if (!weight_taps_ && g.filters * taps_ >= kGatherWeights)
    for (TapRows& tap : tap_rows_) {
      tap.first_row = gathered_rows_;
      gathered_rows_ += g.batch * static_cast<int64_t>(tap.pixels.size());
    }
  wr_ = AlignedBuffer(static_cast<std::size_t>(g.filters * taps_));
}

std::size_t SmallMapConv::scratchpad_bytes() const {
  // The taps' weight gradient: packed inputs [N][side²][C] and output
  // gradients [N][4][O] (channels and filters rounded up to their blocks).
  const int64_t weight_taps_floats =
      g_.batch * (g_.height * g_.width * taps2x2::channel_vectors(g_.channels) * simd::kLanes +
                  4 * taps2x2::filter_groups(g_.filters) * 16);
  if (taps2x2_)  // packed activations [4][C or O][N] and sums [O or C][4][N], or the weight gradient's
    return static_cast<std::size_t>(
               std::max(4 * taps2x2::padded_batch(g_.batch) * (g_.channels + g_.filters), weight_taps_floats)) *
           sizeof(float);
  if (weight_taps_) return static_cast<std::size_t>(weight_taps_floats) * sizeof(float);
  return static_cast<std::size_t>(g_.filters * taps_ + gathered_rows_ * (g_.channels + g_.filters)) * sizeof(float);
}

void SmallMapConv::prepare(const float* weight) {
  if (taps2x2_) return;  // read where they are
  const int64_t C = g_.channels, kk = g_.kernel * g_.kernel;
  float* wr = wr_.data();
  // Wr[o][j][c] = W[o][c][j] (j = ky · k + kx): each filter's own block.
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t o = 0; o < g_.filters; ++o) taps_outward(weight + o * C * kk, wr + o * kk * C, C, kk);
}

void SmallMapConv::gather(const float* from, int64_t width, int64_t map_pixels, bool outputs, float* to) const {
  const int64_t taps = static_cast<int64_t>(tap_rows_.size());
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t j = 0; j < taps; ++j) {
    const TapRows& tap = tap_rows_[static_cast<std::size_t>(j)];
    int64_t row = tap.first_row;
    for (const auto& [out, in] : tap.pixels)
      for (int64_t n = 0; n < g_.batch; ++n, ++row) {
        const float* x = from + (n * map_pixels + (outputs ? out : in)) * width;
        std::copy(x, x + width, to + row * width);
      }
  }
}

void SmallMapConv::taps2x2_sums(const float* from, const float* weight, const float* bias, bool input_gradient,
                                float* to) const {
  // K: what the sums run over (the forward's channels); R: what they give.
  const int64_t C = g_.channels, O = g_.filters, N = g_.batch;
  const int64_t K = input_gradient ? O : C, R = input_gradient ? C : O;
  float* packed = scratch_;
  float* sums = packed + 4 * taps2x2::padded_batch(N) * K;
  over_shares(threads_, K, [&](int64_t k0, int64_t k1) { taps2x2::pack(from, N, K, k0, k1, packed); });
  over_shares(threads_, R, [&](int64_t r0, int64_t r1) {
    taps2x2::sums(weight, C, input_gradient, packed, K, N, r0, r1, bias, sums, to, R);
  });
}

void SmallMapConv::forward(const float* src, const float* weight, const float* bias, float* dst) {
  if (taps2x2_) return taps2x2_sums(src, weight, bias, false, dst);
  const int64_t C = g_.channels, O = g_.filters, N = g_.batch;
  const int64_t pixels = g_.out_height * g_.out_width, image = g_.height * g_.width * C;
  const float* wr = wr_.data();
  over_shares(threads_, O, [&](int64_t o0, int64_t o1) {
    for (int64_t r = 0; r < N * pixels; ++r) {
      float* y = dst + r * O;
      if (bias)
        std::copy(bias + o0, bias + o1, y + o0);
      else
        std::fill(y + o0, y + o1, 0.0f);
    }
    for (const Run& run : runs_)
      sgemm('N', 'T', N, o1 - o0, run.taps * C, src + run.input * C, image, wr + o0 * taps_ + run.tap * C, taps_,
            dst + run.pixel * O + o0, pixels * O, 1.0f);
  });
}

void SmallMapConv::weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) {
  const int64_t C = g_.channels, O = g_.filters, N = g_.batch, kk = g_.kernel * g_.kernel;
  if (weight_taps_) {
    const int64_t Q = g_.height * g_.width;
    float* xs = scratch_;
    float* ds = xs + taps2x2::channel_vectors(C) * simd::kLanes * N * Q;
    // Each split over the threads on its own: a channel vector's inputs are
    // Q / 4 times a filter group's output gradients.
    over_shares(threads_, taps2x2::channel_vectors(C),
                [&](int64_t v0, int64_t v1) { taps2x2::pack_channels(src, N, Q, C, v0, v1, xs); });
    over_shares(threads_, taps2x2::filter_groups(O),
                [&](int64_t g0, int64_t g1) { taps2x2::pack_filters(diff_dst, N, O, g0, g1, ds); });
    over_shares(threads_, O, [&](int64_t o0, int64_t o1) {
      taps2x2::weight_gradient(static_cast<int>(g_.width), xs, ds, N, C, o0, o1, dw);
      if (db) bias_gradient(diff_dst, N * g_.out_height * g_.out_width, O, o0, o1, db);
    });
    return;
  }
  const int64_t pixels = g_.out_height * g_.out_width, in_pixels = g_.height * g_.width;
  float* dwr = scratch_;
  float* xg = dwr + O * taps_;           // X_j, [gathered_rows_][C]
  float* dyg = xg + gathered_rows_ * C;  // dY_j, [gathered_rows_][O]
  if (gathered_rows_ > 0) {
    gather(src, C, in_pixels, false, xg);
    gather(diff_dst, O, pixels, true, dyg);
  }
  const int64_t image = in_pixels * C;
  // The filters are the GEMMs' rows: fixed chunks, not shares (sgemm.h).
  over_row_chunks(threads_, O, [&](int64_t o0, int64_t o1) {
    if (gathered_rows_ > 0) {
      for (std::size_t j = 0; j < tap_rows_.size(); ++j) {
        const TapRows& tap = tap_rows_[j];
        const int64_t rows = N * static_cast<int64_t>(tap.pixels.size()), col = static_cast<int64_t>(j) * C;
        if (rows == 0)
          for (int64_t o = o0; o < o1; ++o) std::fill_n(dwr + o * taps_ + col, C, 0.0f);
        else
          sgemm('T', 'N', o1 - o0, C, rows, dyg + tap.first_row * O + o0, O, xg + tap.first_row * C, C,
                dwr + o0 * taps_ + col, taps_);
      }
    } else {
      std::fill(dwr + o0 * taps_, dwr + o1 * taps_, 0.0f);
      for (const Run& run : runs_)
        sgemm('T', 'N', o1 - o0, run.taps * C, N, diff_dst + run.pixel * O + o0, pixels * O, src + run.input * C,
              image, dwr + o0 * taps_ + run.tap * C, taps_, 1.0f);
    }
    for (int64_t o = o0; o < o1; ++o) taps_inward(dwr + o * taps_, dw + o * C * kk, C, kk);
    if (db) bias_gradient(diff_dst, N * g_.out_height * g_.out_width, O, o0, o1, db);
  });
}

void SmallMapConv::input_gradient(const float* diff_dst, const float* weight, float* diff_src) {
  if (taps2x2_) return taps2x2_sums(diff_dst, weight, nullptr, true, diff_src);
  const int64_t C = g_.channels, O = g_.filters, N = g_.batch;
  const int64_t pixels = g_.out_height * g_.out_width, image = g_.height * g_.width * C;
  const float* wr = wr_.data();
  over_shares(threads_, C, [&](int64_t c0, int64_t c1) {
    for (int64_t r = 0; r < N * g_.height * g_.width; ++r) std::fill(diff_src + r * C + c0, diff_src + r * C + c1, 0.0f);
    // One GEMM per tap: a thread's channels are a part of each tap's C.
    for (const Run& run : runs_)
      for (int64_t j = 0; j < run.taps; ++j)
        sgemm('N', 'N', N, c1 - c0, O, diff_dst + run.pixel * O, pixels * O, wr + (run.tap + j) * C + c0, taps_,
              diff_src + (run.input + j) * C + c0, image, 1.0f);
  });
}

}  // namespace convoy::cpu
