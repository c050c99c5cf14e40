#include "backends/cpu/planar_conv.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "backends/cpu/parts.h"
#include "backends/cpu/planar_pool.h"
#include "backends/cpu/planes.h"
#include "backends/cpu/simd.h"

namespace convoy::cpu {
namespace {

using simd::kLanes;
using Vec = simd::Vec;

// Staged rows per band: input and output (or its gradient) together within
// ~half of a 32 KiB L1, so every filter tile's pass over the band hits L1.
constexpr int64_t kBandBytes = 16 * 1024;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Filters per weight-gradient tile at most: as many as fit the registers
// with R filters × K kernel columns of sums, R gradient vectors and one
// input vector. Each input vector serves R FMAs, so the more filters a tile
// takes the fewer loads per FMA (seed conv 1→10 k5 on AVX-512: 2 tiles of 5,
// not 5 of 2). Never fewer than 8 independent FMA chains (two FMA units,
// four cycles each), the rule before, though that spills a register (k7 and
// k1 on AVX2: 2 and 8 filters). Filters are cut into near-equal parts of at
// most this many (parts.h): none padded.
constexpr int grad_tile_filters(int kernel) {
  return std::max((simd::kRegisters - 1) / (kernel + 1), (8 + kernel - 1) / kernel);
}

// Filters per forward tile, and blocks of kLanes positions taken together:
// 5 filters × B blocks of sums, 5 broadcast weights and one input vector fill
// the 16 registers of AVX2 (B = 2) or the 32 of AVX-512 (B = 4).
constexpr int64_t kForwardFilters = 5;
constexpr int kForwardBlocks = kLanes == 16 ? 4 : 2;

// Whether a staged band is one flat run of positions rather than rows of
// blocks (planar_conv.h): by the columns each wastes, so for a 24-wide output
// and k5 rows of 8 lanes (24 of 24) and a flat run of 16 (24 of 28, not 24 of
// 32). A fixed rule per width: each copy's arithmetic does not depend on timing.
bool flat_layout(int64_t out_width, int64_t kernel) {
  return out_width + kernel - 1 < round_up(out_width, kLanes);
}

// One staged band: `rows` output rows of one image; the input's planes
// [channels][rows + k - 1][in_cols], the output's (or its gradient's)
// [filters][rows][out_cols] (the forward's filters rounded up to its tile,
// the gradient's as they are). The band's output positions are walked
// in blocks of kLanes: `block_rows` rows of `per_row` blocks, block (i, j)
// reading the input from i * in_cols + j * kLanes (+ kh * in_cols + kw) and
// writing the output at i * out_cols + j * kLanes. Rows of blocks: out_cols
// = round_up(out_width, kLanes). Flat: out_cols = in_cols and one row of
// blocks over all rows × in_cols positions; the k - 1 positions at the end of
// each row are junk (the forward discards them; the gradient holds zeros there).
struct BandLayout {
  int64_t channels, filters, rows, in_cols, in_plane, out_cols, out_plane;
  bool flat;
  int64_t block_rows() const { return flat ? 1 : rows; }
  int64_t per_row() const { return flat ? (rows * out_cols + kLanes - 1) / kLanes : out_cols / kLanes; }
  int64_t in_at(int64_t i, int64_t j) const { return i * in_cols + j * kLanes; }
  int64_t out_at(int64_t i, int64_t j) const { return i * out_cols + j * kLanes; }
};

BandLayout band_layout(const ConvGeometry& g, int64_t filters, int64_t rows, int64_t in_cols, int64_t in_plane,
                       int64_t out_cols, int64_t out_plane, bool flat) {
  return {.channels = g.channels, .filters = filters, .rows = rows, .in_cols = in_cols,
          .in_plane = in_plane, .out_cols = out_cols, .out_plane = out_plane, .flat = flat};
}

// Calls fn.template operator()<K>() with the kernel size as a compile-time
// constant, so the taps unroll.
template <class Fn>
void with_kernel(int64_t kernel, Fn&& fn) {
  switch (kernel) {
    case 1: return fn.template operator()<1>();
    case 2: return fn.template operator()<2>();
    case 3: return fn.template operator()<3>();
    case 4: return fn.template operator()<4>();
    case 5: return fn.template operator()<5>();
    case 6: return fn.template operator()<6>();
    case 7: return fn.template operator()<7>();
  }
  throw std::logic_error("planar conv: kernel size " + std::to_string(kernel) + " has no tile");
}

// planes[o][out[j]..] = bias[o] + Σ weight[o][c][kh][kw] · input[c][in[j] + kh·in_cols + kw..]
// for B blocks of kLanes output positions at once, kForwardFilters filters at a time.
template <int K, int B>
void forward_blocks(const BandLayout& b, const float* input, const float* weight, const float* bias,
                    const int64_t* in, const int64_t* out, float* planes) {
  constexpr int R = kForwardFilters;
  const int64_t taps = b.channels * K * K;
  for (int64_t o0 = 0; o0 < b.filters; o0 += R) {
    Vec acc[R][B];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < B; ++j) acc[r][j] = simd::broadcast<Vec>(bias[o0 + r]);
    const float* w = weight + o0 * taps;
    for (int64_t c = 0; c < b.channels; ++c)
      for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw) {
          const int64_t t = (c * K + kh) * K + kw;
          Vec wv[R];
          for (int r = 0; r < R; ++r) wv[r] = simd::broadcast<Vec>(w[r * taps + t]);
          for (int j = 0; j < B; ++j) {
            // Loaded once, not once per filter (see accumulate_band).
            const Vec xv = simd::pinned(simd::load<Vec>(input + c * b.in_plane + in[j] + kh * b.in_cols + kw));
            for (int r = 0; r < R; ++r) acc[r][j] = simd::fma(wv[r], xv, acc[r][j]);
          }
        }
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < B; ++j) simd::store(planes + (o0 + r) * b.out_plane + out[j], acc[r][j]);
  }
}

// The forward pass over one staged band, kForwardBlocks blocks at a time (a
// shorter group last).
void forward_band(int64_t kernel, const BandLayout& b, const float* input, const float* weight, const float* bias,
                  float* planes) {
  constexpr int B = kForwardBlocks;
  const int64_t per_row = b.per_row(), blocks = b.block_rows() * per_row;
  with_kernel(kernel, [&]<int K> {
    for (int64_t i = 0; i < blocks; i += B) {
      int64_t in[B], out[B];
      const int64_t count = std::min<int64_t>(B, blocks - i);
      for (int64_t j = 0; j < count; ++j) {
        in[j] = b.in_at((i + j) / per_row, (i + j) % per_row);
        out[j] = b.out_at((i + j) / per_row, (i + j) % per_row);
      }
      [&]<int... J>(std::integer_sequence<int, J...>) {
        // forward_blocks<K, count> for count = 1 .. B, known at compile time.
        ((count == J + 1 ? forward_blocks<K, J + 1>(b, input, weight, bias, in, out, planes) : void()), ...);
      }(std::make_integer_sequence<int, B>{});
    }
  });
}

// sums[o][c][kh][kw][lane] += Σ over the band's blocks of grad[o][block] · input[c][block + kh·in_cols + kw]
// for one staged band and filters o0 .. o0 + R, R filters × K kernel columns
// in registers.
template <int K, int R>
void accumulate_filters(const BandLayout& b, int64_t o0, const float* input, const float* grad, float* sums) {
  const int64_t block_rows = b.block_rows(), per_row = b.per_row();
  for (int64_t c = 0; c < b.channels; ++c)
    for (int64_t kh = 0; kh < K; ++kh) {
      Vec acc[R][K] = {};
      for (int64_t i = 0; i < block_rows; ++i) {
        const float* x_row = input + c * b.in_plane + b.in_at(i, 0) + kh * b.in_cols;
        const float* d_row = grad + o0 * b.out_plane + b.out_at(i, 0);
        for (int64_t x = 0; x < per_row * kLanes; x += kLanes) {
          // Each value loaded once: R gradient vectors, then K shifted input
          // vectors, each used by R FMAs (two loads a cycle would otherwise
          // be the limit).
          Vec d[R];
          for (int r = 0; r < R; ++r) d[r] = simd::load<Vec>(d_row + r * b.out_plane + x);
          for (int kw = 0; kw < K; ++kw) {
            // pinned: GCC would otherwise fold the load into each of the R
            // FMAs, loading it R times.
            const Vec xv = simd::pinned(simd::load<Vec>(x_row + x + kw));
            for (int r = 0; r < R; ++r) acc[r][kw] = simd::fma(d[r], xv, acc[r][kw]);
          }
        }
      }
      for (int r = 0; r < R; ++r) {
        float* s = sums + (((o0 + r) * b.channels + c) * K + kh) * K * kLanes;
        for (int kw = 0; kw < K; ++kw)
          simd::store(s + kw * kLanes, simd::load<Vec>(s + kw * kLanes) + acc[r][kw]);
      }
    }
}

// bias_sums[o][lane] += Σ over the band's blocks of grad[o][block]
void accumulate_bias(const BandLayout& b, const float* grad, float* bias_sums) {
  const int64_t block_rows = b.block_rows(), per_row = b.per_row();
  for (int64_t o = 0; o < b.filters; ++o) {
    Vec acc = simd::load<Vec>(bias_sums + o * kLanes);
    for (int64_t i = 0; i < block_rows; ++i)
      for (int64_t j = 0; j < per_row; ++j) acc += simd::load<Vec>(grad + o * b.out_plane + b.out_at(i, j));
    simd::store(bias_sums + o * kLanes, acc);
  }
}

using AccumulateFn = void (*)(const BandLayout&, int64_t, const float*, const float*, float*);

// accumulate_filters<K, R> for R = 1 .. sizeof...(R).
template <int K, int... R>
constexpr std::array<AccumulateFn, sizeof...(R)> accumulate_tiles(std::integer_sequence<int, R...>) {
  return {&accumulate_filters<K, R + 1>...};
}

// The weight gradient's sums over one staged band, all filters.
void accumulate_weights(int64_t kernel, const BandLayout& b, const float* input, const float* grad, float* sums) {
  with_kernel(kernel, [&]<int K> {
    constexpr int most = grad_tile_filters(K);
    static constexpr auto tiles = accumulate_tiles<K>(std::make_integer_sequence<int, most>{});
    for_parts(b.filters, most,
              [&](int64_t o0, int64_t count) { tiles[static_cast<std::size_t>(count - 1)](b, o0, input, grad, sums); });
  });
}

}  // namespace

bool PlanarConv::suits(const ConvGeometry& g) {
  return g.stride == 1 && g.groups == 1 && g.channels == 1 && g.kernel <= kMaxKernel;
}

PlanarConv::PlanarConv(const ConvGeometry& g)
    : g_(g),
      forward_filters_(round_up(g.filters, kForwardFilters)),
      flat_(flat_layout(g.out_width, g.kernel)),
      out_cols_(flat_ ? g.out_width + g.kernel - 1 : round_up(g.out_width, kLanes)),
      in_cols_(flat_ ? out_cols_ : out_cols_ + g.kernel - 1) {
  if (!suits(g)) throw std::logic_error("PlanarConv built for a convolution it does not suit");
  // Equal bands of at most kBandBytes of staged rows each.
  const int64_t filters = runs_forward() ? std::max(forward_filters_, g.filters) : g.filters;
  const int64_t row_bytes = (filters * out_cols_ + g.channels * in_cols_) * int64_t{sizeof(float)};
  const int64_t most = std::clamp<int64_t>(kBandBytes / row_bytes, 1, g.out_height);
  const int64_t bands = (g.out_height + most - 1) / most;
  band_ = (g.out_height + bands - 1) / bands;
  // A flat band's last block reads up to kLanes + k - 1 floats past its rows.
  in_plane_ = round_up((band_ + g.kernel - 1) * in_cols_ + kLanes + g.kernel, kLanes);
  out_plane_ = round_up(band_ * out_cols_, kLanes);
  const int64_t taps = g.channels * g.kernel * g.kernel;
  weight_ = AlignedBuffer(static_cast<std::size_t>(forward_filters_ * taps));
  bias_ = AlignedBuffer(static_cast<std::size_t>(forward_filters_));
  threads_.resize(static_cast<std::size_t>(omp_get_max_threads()));
  for (Workspace& w : threads_) {
    // Zeroed once: the padding columns and rows are never written and stay zero.
    w.input = AlignedBuffer(static_cast<std::size_t>(g.channels * in_plane_));
    if (runs_forward()) w.planes = AlignedBuffer(static_cast<std::size_t>(forward_filters_ * out_plane_));
    w.grad = AlignedBuffer(static_cast<std::size_t>(g.filters * out_plane_));
    w.sums = AlignedBuffer(static_cast<std::size_t>(g.filters * (taps + 1) * kLanes));
    w.out.assign(static_cast<std::size_t>(g.filters * (taps + 1)), 0.0f);
  }
}

void PlanarConv::stage_input(Workspace& w, int64_t n, int64_t y0, int64_t rows, const float* src) const {
  const ConvGeometry& g = g_;
  const int64_t in_rows = rows + g.kernel - 1;
  // Only columns [pad_left, pad_left + width) of a staged row are ever
  // written; the padding columns keep the zeros they were allocated with.
  const int64_t width = std::min(g.width, in_cols_ - g.pad_left);
  for (int64_t i = 0; i < in_rows; ++i) {
    const int64_t y = y0 + i - g.pad_top;
    float* row = w.input.data() + i * in_cols_;
    if (y < 0 || y >= g.height) {
      for (int64_t c = 0; c < g.channels; ++c) std::fill_n(row + c * in_plane_, in_cols_, 0.0f);
      continue;
    }
    to_planes(src + (n * g.height + y) * g.width * g.channels, width, g.channels, row + g.pad_left, in_plane_);
  }
}

void PlanarConv::set_pooling(bool relu) {
  if (!can_pool_2x2()) throw std::logic_error("PlanarConv asked to pool bands that hold no whole 2x2 windows");
  pooling_ = true;
  relu_ = relu;
  pooled_height_ = g_.out_height / 2;
  pooled_width_ = g_.out_width / 2;
  pitch_ = planar_pool_pitch(pooled_width_);
  // The pool's vectors read and write junk lanes past a band's last plane.
  const int64_t slack = planar_pool_slack(pitch_);
  const auto staged = static_cast<std::size_t>(band_ / 2 * g_.filters * pitch_);
  for (Workspace& w : threads_) {
    w.planes = AlignedBuffer(static_cast<std::size_t>(forward_filters_ * out_plane_ + slack));
    w.grad = AlignedBuffer(static_cast<std::size_t>(g_.filters * out_plane_ + slack));
    w.pooled = AlignedBuffer(staged);
    w.d_pooled = AlignedBuffer(staged);  // the lanes past the pooled width stay zero
  }
}

int64_t PlanarConv::positions_size() const { return g_.batch * pooled_height_ * g_.filters * pitch_; }

PlanarPoolBand PlanarConv::pool_band(int64_t rows) const {
  return {.filters = g_.filters, .plane = out_plane_, .cols = out_cols_, .rows = rows, .width = g_.out_width,
          .pooled_cols = pooled_width_, .pitch = pitch_, .relu = relu_};
}

void PlanarConv::forward_images(Workspace& w, int64_t first_image, int64_t end_image, const float* src,
                                float* dst, uint8_t* positions) const {
  const ConvGeometry& g = g_;
  for (int64_t n = first_image; n < end_image; ++n)
    for (int64_t y0 = 0; y0 < g.out_height; y0 += band_) {
      const int64_t rows = std::min(band_, g.out_height - y0);
      const BandLayout b = band_layout(g, forward_filters_, rows, in_cols_, in_plane_, out_cols_, out_plane_, flat_);
      stage_input(w, n, y0, rows, src);
      forward_band(g.kernel, b, w.input.data(), weight_.data(), bias_.data(), w.planes.data());
      if (positions) {
        // Only the pooled rows leave the band, as NHWC.
        const int64_t first = n * pooled_height_ + y0 / 2, row = g.filters * pitch_;
        pool_band_2x2(pool_band(rows), w.planes.data(), w.pooled.data(), positions + first * row);
        for (int64_t py = 0; py < rows / 2; ++py)
          from_planes(w.pooled.data() + py * row, pitch_, pooled_width_, g.filters,
                      dst + (first + py) * pooled_width_ * g.filters);
        continue;
      }
      for (int64_t y = 0; y < rows; ++y)
        from_planes(w.planes.data() + y * out_cols_, out_plane_, g.out_width, g.filters,
                    dst + (n * g.out_height + y0 + y) * g.out_width * g.filters);
    }
}

void PlanarConv::gradient_images(Workspace& w, int64_t first_image, int64_t end_image, const float* src,
                                 const float* diff_dst, const uint8_t* positions) const {
  const ConvGeometry& g = g_;
  const int64_t taps = g.channels * g.kernel * g.kernel;
  float* sums = w.sums.data();
  float* bias_sums = sums + g.filters * taps * kLanes;
  std::fill_n(sums, w.sums.size(), 0.0f);
  for (int64_t n = first_image; n < end_image; ++n)
    for (int64_t y0 = 0; y0 < g.out_height; y0 += band_) {
      const int64_t rows = std::min(band_, g.out_height - y0);
      const BandLayout b = band_layout(g, g.filters, rows, in_cols_, in_plane_, out_cols_, out_plane_, flat_);
      stage_input(w, n, y0, rows, src);
      // Columns past the image's stay zero; in a
      // flat band so must the positions its last block reads past its rows
      // (a longer band before may have left values there).
      if (positions) {
        // The conv output's gradient from the pooled one's: what the unfused
        // pool's backward pass writes, without its NHWC round trip.
        const int64_t first = n * pooled_height_ + y0 / 2, row = g.filters * pitch_;
        for (int64_t py = 0; py < rows / 2; ++py)
          to_planes(diff_dst + (first + py) * pooled_width_ * g.filters, pooled_width_, g.filters,
                    w.d_pooled.data() + py * row, pitch_);
        route_band_2x2(pool_band(rows), w.d_pooled.data(), positions + first * row, w.grad.data());
      } else {
        for (int64_t y = 0; y < rows; ++y)
          to_planes(diff_dst + (n * g.out_height + y0 + y) * g.out_width * g.filters, g.out_width, g.filters,
                    w.grad.data() + y * out_cols_, out_plane_);
      }
      if (flat_)
        for (int64_t o = 0; o < g.filters; ++o)
          std::fill(w.grad.data() + o * out_plane_ + rows * out_cols_,
                    w.grad.data() + o * out_plane_ + round_up(rows * out_cols_, kLanes), 0.0f);
      accumulate_weights(g.kernel, b, w.input.data(), w.grad.data(), sums);
      accumulate_bias(b, w.grad.data(), bias_sums);
    }
  // Lanes summed in a fixed order.
  for (int64_t o = 0; o < g.filters; ++o) {
    for (int64_t t = 0; t < taps; ++t) w.out[o * taps + t] = simd::sum_lanes<kLanes>(sums + (o * taps + t) * kLanes);
    w.out[g.filters * taps + o] = simd::sum_lanes<kLanes>(bias_sums + o * kLanes);
  }
}

void PlanarConv::forward(const float* src, const float* weight, const float* bias, float* dst) {
  run_forward(src, weight, bias, dst, nullptr);
}

void PlanarConv::forward_pooled(const float* src, const float* weight, const float* bias, float* pooled,
                                uint8_t* positions) {
  if (!pooling_) throw std::logic_error("PlanarConv::forward_pooled before set_pooling");
  run_forward(src, weight, bias, pooled, positions);
}

void PlanarConv::weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) {
  run_weight_gradient(src, diff_dst, nullptr, dw, db);
}

void PlanarConv::weight_gradient_pooled(const float* src, const float* d_pooled, const uint8_t* positions, float* dw,
                                        float* db) {
  if (!pooling_) throw std::logic_error("PlanarConv::weight_gradient_pooled before set_pooling");
  run_weight_gradient(src, d_pooled, positions, dw, db);
}

void PlanarConv::run_forward(const float* src, const float* weight, const float* bias, float* dst,
                             uint8_t* positions) {
  const int64_t taps = g_.channels * g_.kernel * g_.kernel;
  std::copy_n(weight, g_.filters * taps, weight_.data());  // the padded filters stay zero
  if (bias) std::copy_n(bias, g_.filters, bias_.data());
  const int64_t batch = g_.batch;
#pragma omp parallel num_threads(static_cast<int>(threads_.size()))
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    forward_images(threads_[static_cast<std::size_t>(t)], batch * t / nt, batch * (t + 1) / nt, src, dst, positions);
  }
}

void PlanarConv::run_weight_gradient(const float* src, const float* diff_dst, const uint8_t* positions, float* dw,
                                     float* db) {
  int used = 1;
  const int64_t batch = g_.batch;
#pragma omp parallel num_threads(static_cast<int>(threads_.size()))
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (t == 0) used = nt;
    gradient_images(threads_[static_cast<std::size_t>(t)], batch * t / nt, batch * (t + 1) / nt, src, diff_dst,
                    positions);
  }
  const int64_t weights = g_.filters * g_.channels * g_.kernel * g_.kernel;
  for (int64_t i = 0; i < weights + g_.filters; ++i) {
    float total = 0;
    for (int t = 0; t < used; ++t) total += threads_[static_cast<std::size_t>(t)].out[static_cast<std::size_t>(i)];
    if (i < weights) dw[i] = total;
    else if (db) db[i - weights] = total;
  }
}

}  // namespace convoy::cpu
