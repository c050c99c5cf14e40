#include "backends/cpu/planar_conv.h"

#include <omp.h>

#include <algorithm>
#include <stdexcept>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define CONVOY_PLANAR_CONV 1
#endif

namespace convoy::cpu {
namespace {

constexpr int64_t kLanes = 8;
// Staged rows per band: input and output (or its gradient) together within
// ~half of a 32 KiB L1, so every filter tile's pass over the band hits L1.
constexpr int64_t kBandBytes = 16 * 1024;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Filters per register tile: R filters × k kernel columns of 8-lane sums, at
// least 8 independent FMA chains (two FMA units, four cycles each).
int64_t tile_filters(int64_t kernel) { return (kLanes + kernel - 1) / kernel; }

// Filters per forward tile: 5 filters × 2 column blocks of sums, 5 broadcast
// weights and one input vector fill the 16 AVX2 registers.
constexpr int64_t kForwardFilters = 5;

#if CONVOY_PLANAR_CONV
// One staged band: `rows` output rows of one image; the input's planes
// [channels][rows + k - 1][in_cols], the output's (or its gradient's)
// [filters_padded][rows][out_cols].
struct BandLayout {
  int64_t channels, filters_padded, rows, in_cols, in_plane, out_cols, out_plane;
};

// Bands of at most `band` rows (the rows still to be set).
BandLayout band_layout(const ConvGeometry& g, int64_t filters, int64_t band, int64_t in_cols, int64_t out_cols) {
  return {.channels = g.channels, .filters_padded = filters, .rows = 0, .in_cols = in_cols,
          .in_plane = (band + g.kernel - 1) * in_cols, .out_cols = out_cols, .out_plane = band * out_cols};
}

// out[j * out_stride + i] = in[i * in_stride + j] for an 8 × 8 block.
void transpose8x8(const float* in, int64_t in_stride, float* out, int64_t out_stride) {
  __m256 r[8], t[8], s[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(in + i * in_stride);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int j = 0; j < 4; ++j) {
    _mm256_storeu_ps(out + j * out_stride, _mm256_permute2f128_ps(s[j], s[j + 4], 0x20));
    _mm256_storeu_ps(out + (j + 4) * out_stride, _mm256_permute2f128_ps(s[j], s[j + 4], 0x31));
  }
}

// planes[c * plane + p] = pixels[p * channels + c] for p < count: one row of
// an NHWC image spread over channel planes.
void to_planes(const float* pixels, int64_t count, int64_t channels, float* planes, int64_t plane) {
  if (channels == 1) {
    std::copy_n(pixels, count, planes);
    return;
  }
  int64_t p = 0;
  if (channels >= 8)
    for (; p + 8 <= count; p += 8)
      for (int64_t c0 = 0; c0 < channels; c0 += 8) {
        const int64_t c = std::min(c0, channels - 8);  // the last block may overlap the one before: same values
        transpose8x8(pixels + p * channels + c, channels, planes + c * plane + p, plane);
      }
  for (; p < count; ++p)
    for (int64_t c = 0; c < channels; ++c) planes[c * plane + p] = pixels[p * channels + c];
}

// The inverse: pixels[p * channels + c] = planes[c * plane + p] for p < count.
void from_planes(const float* planes, int64_t plane, int64_t count, int64_t channels, float* pixels) {
  if (channels == 1) {
    std::copy_n(planes, count, pixels);
    return;
  }
  int64_t p = 0;
  if (channels >= 8)
    for (; p + 8 <= count; p += 8)
      for (int64_t c0 = 0; c0 < channels; c0 += 8) {
        const int64_t c = std::min(c0, channels - 8);
        transpose8x8(planes + c * plane + p, plane, pixels + p * channels + c, channels);
      }
  for (; p < count; ++p)
    for (int64_t c = 0; c < channels; ++c) pixels[p * channels + c] = planes[c * plane + p];
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

// planes[o][block j] = bias[o] + Σ weight[o][c][kh][kw] · input[c][kh, kw from block j]
// for B blocks of 8 output columns at once (input offsets in[], output
// offsets out[]), kForwardFilters filters at a time.
template <int K, int B>
void forward_blocks(const BandLayout& b, const float* input, const float* weight, const float* bias,
                    const int64_t* in, const int64_t* out, float* planes) {
  constexpr int R = kForwardFilters;
  const int64_t taps = b.channels * K * K;
  for (int64_t o0 = 0; o0 < b.filters_padded; o0 += R) {
    __m256 acc[R][B];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < B; ++j) acc[r][j] = _mm256_set1_ps(bias[o0 + r]);
    const float* w = weight + o0 * taps;
    for (int64_t c = 0; c < b.channels; ++c)
      for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw) {
          const int64_t t = (c * K + kh) * K + kw;
          __m256 wv[R];
          for (int r = 0; r < R; ++r) wv[r] = _mm256_broadcast_ss(w + r * taps + t);
          for (int j = 0; j < B; ++j) {
            __m256 xv = _mm256_loadu_ps(input + c * b.in_plane + in[j] + kh * b.in_cols + kw);
            asm("" : "+x"(xv));  // loaded once, not once per filter (see accumulate_band)
            for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(wv[r], xv, acc[r][j]);
          }
        }
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < B; ++j) _mm256_store_ps(planes + (o0 + r) * b.out_plane + out[j], acc[r][j]);
  }
}

// The forward pass over one staged band, two blocks of 8 columns at a time.
void forward_band(int64_t kernel, const BandLayout& b, const float* input, const float* weight, const float* bias,
                  float* planes) {
  const int64_t per_row = b.out_cols / kLanes, blocks = b.rows * per_row;
  with_kernel(kernel, [&]<int K> {
    for (int64_t i = 0; i < blocks; i += 2) {
      int64_t in[2], out[2];
      const int64_t count = std::min<int64_t>(2, blocks - i);
      for (int64_t j = 0; j < count; ++j) {
        const int64_t y = (i + j) / per_row, x = (i + j) % per_row * kLanes;
        in[j] = y * b.in_cols + x;
        out[j] = y * b.out_cols + x;
      }
      if (count == 2) forward_blocks<K, 2>(b, input, weight, bias, in, out, planes);
      else forward_blocks<K, 1>(b, input, weight, bias, in, out, planes);
    }
  });
}

// sums[o][c][kh][kw][lane] += Σ_y Σ_x grad[o][y][x] · input[c][y + kh][x + kw]
// for one staged band, R filters × K kernel columns at a time.
template <int K, int R>
void accumulate_band(const BandLayout& b, const float* input, const float* grad, float* sums) {
  for (int64_t o0 = 0; o0 < b.filters_padded; o0 += R)
    for (int64_t c = 0; c < b.channels; ++c)
      for (int64_t kh = 0; kh < K; ++kh) {
        __m256 acc[R][K];
        for (int r = 0; r < R; ++r)
          for (int kw = 0; kw < K; ++kw) acc[r][kw] = _mm256_setzero_ps();
        for (int64_t y = 0; y < b.rows; ++y) {
          const float* x_row = input + c * b.in_plane + (y + kh) * b.in_cols;
          const float* d_row = grad + o0 * b.out_plane + y * b.out_cols;
          for (int64_t x = 0; x < b.out_cols; x += kLanes) {
            // Each value loaded once: R gradient vectors, then K shifted input
            // vectors, each used by R FMAs (two loads a cycle would otherwise
            // be the limit).
            __m256 d[R];
            for (int r = 0; r < R; ++r) d[r] = _mm256_load_ps(d_row + r * b.out_plane + x);
            for (int kw = 0; kw < K; ++kw) {
              __m256 xv = _mm256_loadu_ps(x_row + x + kw);
              // Keeps xv in a register: GCC would otherwise fold the load
              // into each of the R FMAs, loading it R times.
              asm("" : "+x"(xv));
              for (int r = 0; r < R; ++r) acc[r][kw] = _mm256_fmadd_ps(d[r], xv, acc[r][kw]);
            }
          }
        }
        for (int r = 0; r < R; ++r) {
          float* s = sums + (((o0 + r) * b.channels + c) * K + kh) * K * kLanes;
          for (int kw = 0; kw < K; ++kw)
            _mm256_store_ps(s + kw * kLanes, _mm256_add_ps(_mm256_load_ps(s + kw * kLanes), acc[r][kw]));
        }
      }
}

// bias_sums[o][lane] += Σ_y Σ_x grad[o][y][x]
void accumulate_bias(const BandLayout& b, const float* grad, float* bias_sums) {
  for (int64_t o = 0; o < b.filters_padded; ++o) {
    __m256 acc = _mm256_load_ps(bias_sums + o * kLanes);
    for (int64_t y = 0; y < b.rows; ++y)
      for (int64_t x = 0; x < b.out_cols; x += kLanes)
        acc = _mm256_add_ps(acc, _mm256_load_ps(grad + o * b.out_plane + y * b.out_cols + x));
    _mm256_store_ps(bias_sums + o * kLanes, acc);
  }
}

void accumulate_weights(int64_t kernel, const BandLayout& b, const float* input, const float* grad, float* sums) {
  with_kernel(kernel, [&]<int K> { accumulate_band<K, (kLanes + K - 1) / K>(b, input, grad, sums); });
}
#endif

}  // namespace

bool PlanarConv::suits(const ConvGeometry& g) {
#if CONVOY_PLANAR_CONV
  return g.stride == 1 && g.groups == 1 && g.channels == 1 && g.kernel <= kMaxKernel;
#else
  (void)g;
  return false;
#endif
}

PlanarConv::PlanarConv(const ConvGeometry& g)
    : g_(g),
      forward_filters_(round_up(g.filters, kForwardFilters)),
      grad_filters_(round_up(g.filters, tile_filters(g.kernel))),
      out_cols_(round_up(g.out_width, kLanes)),
      in_cols_(out_cols_ + g.kernel - 1) {
  if (!suits(g)) throw std::logic_error("PlanarConv built for a convolution it does not suit");
  // Equal bands of at most kBandBytes of staged rows each.
  const int64_t filters = runs_forward() ? std::max(forward_filters_, grad_filters_) : grad_filters_;
  const int64_t row_bytes = (filters * out_cols_ + g.channels * in_cols_) * int64_t{sizeof(float)};
  const int64_t most = std::clamp<int64_t>(kBandBytes / row_bytes, 1, g.out_height);
  const int64_t bands = (g.out_height + most - 1) / most;
  band_ = (g.out_height + bands - 1) / bands;
  const int64_t taps = g.channels * g.kernel * g.kernel;
  weight_ = AlignedBuffer(static_cast<std::size_t>(forward_filters_ * taps));
  bias_ = AlignedBuffer(static_cast<std::size_t>(forward_filters_));
  threads_.resize(static_cast<std::size_t>(omp_get_max_threads()));
  for (Workspace& w : threads_) {
    // Zeroed once: the padding columns and rows, and the padded filters'
    // gradient rows, are never written and stay zero.
    w.input = AlignedBuffer(static_cast<std::size_t>(g.channels * (band_ + g.kernel - 1) * in_cols_));
    if (runs_forward()) w.planes = AlignedBuffer(static_cast<std::size_t>(forward_filters_ * band_ * out_cols_));
    w.grad = AlignedBuffer(static_cast<std::size_t>(grad_filters_ * band_ * out_cols_));
    w.sums = AlignedBuffer(static_cast<std::size_t>(grad_filters_ * (taps + 1) * kLanes));
    w.out.assign(static_cast<std::size_t>(g.filters * (taps + 1)), 0.0f);
  }
}

void PlanarConv::stage_input(Workspace& w, int64_t n, int64_t y0, int64_t rows, const float* src) const {
#if CONVOY_PLANAR_CONV
  const ConvGeometry& g = g_;
  const int64_t in_rows = rows + g.kernel - 1, in_plane = (band_ + g.kernel - 1) * in_cols_;
  // Only columns [pad_left, pad_left + width) of a staged row are ever
  // written; the padding columns keep the zeros they were allocated with.
  const int64_t width = std::min(g.width, in_cols_ - g.pad_left);
  for (int64_t i = 0; i < in_rows; ++i) {
    const int64_t y = y0 + i - g.pad_top;
    float* row = w.input.data() + i * in_cols_;
    if (y < 0 || y >= g.height) {
      for (int64_t c = 0; c < g.channels; ++c) std::fill_n(row + c * in_plane, in_cols_, 0.0f);
      continue;
    }
    to_planes(src + (n * g.height + y) * g.width * g.channels, width, g.channels, row + g.pad_left, in_plane);
  }
#else
  (void)w, (void)n, (void)y0, (void)rows, (void)src;
#endif
}

void PlanarConv::forward_images(Workspace& w, int64_t first_image, int64_t end_image, const float* src,
                                float* dst) const {
#if CONVOY_PLANAR_CONV
  const ConvGeometry& g = g_;
  BandLayout b = band_layout(g, forward_filters_, band_, in_cols_, out_cols_);
  for (int64_t n = first_image; n < end_image; ++n)
    for (int64_t y0 = 0; y0 < g.out_height; y0 += band_) {
      b.rows = std::min(band_, g.out_height - y0);
      stage_input(w, n, y0, b.rows, src);
      forward_band(g.kernel, b, w.input.data(), weight_.data(), bias_.data(), w.planes.data());
      for (int64_t y = 0; y < b.rows; ++y)
        from_planes(w.planes.data() + y * out_cols_, b.out_plane, g.out_width, g.filters,
                    dst + (n * g.out_height + y0 + y) * g.out_width * g.filters);
    }
#else
  (void)w, (void)first_image, (void)end_image, (void)src, (void)dst;
#endif
}

void PlanarConv::gradient_images(Workspace& w, int64_t first_image, int64_t end_image, const float* src,
                                 const float* diff_dst) const {
#if CONVOY_PLANAR_CONV
  const ConvGeometry& g = g_;
  const int64_t taps = g.channels * g.kernel * g.kernel;
  float* sums = w.sums.data();
  float* bias_sums = sums + grad_filters_ * taps * kLanes;
  std::fill_n(sums, w.sums.size(), 0.0f);
  BandLayout b = band_layout(g, grad_filters_, band_, in_cols_, out_cols_);
  for (int64_t n = first_image; n < end_image; ++n)
    for (int64_t y0 = 0; y0 < g.out_height; y0 += band_) {
      b.rows = std::min(band_, g.out_height - y0);
      stage_input(w, n, y0, b.rows, src);
      // Columns past the image's and the padded filters' rows stay zero.
      for (int64_t y = 0; y < b.rows; ++y)
        to_planes(diff_dst + (n * g.out_height + y0 + y) * g.out_width * g.filters, g.out_width, g.filters,
                  w.grad.data() + y * out_cols_, b.out_plane);
      accumulate_weights(g.kernel, b, w.input.data(), w.grad.data(), sums);
      accumulate_bias(b, w.grad.data(), bias_sums);
    }
  // Lanes summed in a fixed order; the padded filters are dropped.
  for (int64_t o = 0; o < g.filters; ++o) {
    for (int64_t t = 0; t < taps; ++t) {
      const float* s = sums + (o * taps + t) * kLanes;
      w.out[o * taps + t] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    }
    const float* s = bias_sums + o * kLanes;
    w.out[g.filters * taps + o] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  }
#else
  (void)w, (void)first_image, (void)end_image, (void)src, (void)diff_dst;
#endif
}

void PlanarConv::forward(const float* src, const float* weight, const float* bias, float* dst) {
  const int64_t taps = g_.channels * g_.kernel * g_.kernel;
  std::copy_n(weight, g_.filters * taps, weight_.data());  // the padded filters stay zero
  if (bias) std::copy_n(bias, g_.filters, bias_.data());
  const int64_t batch = g_.batch;
#pragma omp parallel num_threads(static_cast<int>(threads_.size()))
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    forward_images(threads_[static_cast<std::size_t>(t)], batch * t / nt, batch * (t + 1) / nt, src, dst);
  }
}

void PlanarConv::weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) {
  int used = 1;
  const int64_t batch = g_.batch;
#pragma omp parallel num_threads(static_cast<int>(threads_.size()))
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (t == 0) used = nt;
    gradient_images(threads_[static_cast<std::size_t>(t)], batch * t / nt, batch * (t + 1) / nt, src, diff_dst);
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
