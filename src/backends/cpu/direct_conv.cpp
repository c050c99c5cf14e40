#include "backends/cpu/direct_conv.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "backends/cpu/simd.h"

namespace convoy::cpu {
namespace {

using V = simd::Vec;
constexpr int64_t kLanes = simd::kLanes;
#if defined(__AVX512F__)
constexpr int kRegisters = 32;
#else
constexpr int kRegisters = 16;
#endif
// Vectors of sums per tile (the output channels one tile covers), and rows:
// R × NV sums, NV loaded vectors and one broadcast fill the registers.
constexpr int kMaxVectors = kRegisters == 32 ? 4 : 3;
constexpr int kMaxRows = 14;
constexpr int max_rows(int vectors) { return std::min(kMaxRows, (kRegisters - vectors - 1) / vectors); }

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// How a tile walks its operands: `segments` runs of `length` steps; the
// broadcast operand `a` moves a_step per step and a_segment per run, the
// vector operand `b` likewise.
struct Walk {
  int64_t segments, length, a_segment, a_step, b_segment, b_step;
};

// out[r][v·L + lane] += Σ_s Σ_k a[s·a_segment + k·a_step + r·a_row] · b[s·b_segment + k·b_step + v·L + lane]
// for R rows and NV vectors; the sums stay in registers for the whole walk,
// then are added to `out` row by row, so rows may overlap (the input
// gradient's rows do: pixel r's taps are pixel r + 1's, shifted).
template <int R, int NV>
void tile(const Walk& w, const float* a, int64_t a_row, const float* b, float* out, int64_t out_row) {
  // Unrolled whatever the optimisation level: the sums must stay in registers.
  V acc[R][NV] = {};
  for (int64_t s = 0; s < w.segments; ++s) {
    const float* as = a + s * w.a_segment;
    const float* bs = b + s * w.b_segment;
    for (int64_t k = 0; k < w.length; ++k) {
      V bv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) bv[v] = simd::load<V>(bs + k * w.b_step + v * kLanes);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const V av = simd::broadcast<V>(as[k * w.a_step + r * a_row]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[r][v] = simd::fma(av, bv[v], acc[r][v]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* o = out + r * out_row + v * kLanes;
      simd::store(o, simd::load<V>(o) + acc[r][v]);
    }
}

using TileFn = void (*)(const Walk&, const float*, int64_t, const float*, float*, int64_t);

// The tiles that fit the registers; null for those that would spill.
template <int R, int NV>
constexpr TileFn tile_or_null() {
  if constexpr (R <= max_rows(NV)) return &tile<R, NV>;
  else return nullptr;
}
template <int NV, std::size_t... R>
constexpr std::array<TileFn, kMaxRows> tiles_of(std::index_sequence<R...>) {
  return {tile_or_null<static_cast<int>(R) + 1, NV>()...};
}
template <std::size_t... NV>
constexpr auto all_tiles(std::index_sequence<NV...>) {
  return std::array{tiles_of<static_cast<int>(NV) + 1>(std::make_index_sequence<kMaxRows>{})...};
}
constexpr auto kTiles = all_tiles(std::make_index_sequence<kMaxVectors>{});

// Calls fn(first, count) for `total` items cut into the fewest near-equal
// parts of at most `most`.
template <class Fn>
void for_parts(int64_t total, int64_t most, Fn&& fn) {
  const int64_t parts = (total + most - 1) / most;
  for (int64_t i = 0, first = 0; i < parts; ++i) {
    const int64_t count = (total - first) / (parts - i);
    fn(first, count);
    first += count;
  }
}

// One image's forward-shaped pass: out[y][x][0..out_c) = init + Σ over
// taps of in (padded, [out_h + k − 1][out_w + k − 1][in_c]) by packed
// weights [k][k·in_c][out_pad]. `row` holds one output row.
struct Convolve {
  int64_t kernel, in_c, out_h, out_w, out_c, out_pad;
};

void convolve_image(const Convolve& c, const float* in, const float* packed, const float* init, float* row,
                    float* out) {
  const int64_t in_w = c.out_w + c.kernel - 1, taps = c.kernel * c.in_c;
  const Walk walk{.segments = c.kernel, .length = taps, .a_segment = in_w * c.in_c, .a_step = 1,
                  .b_segment = taps * c.out_pad, .b_step = c.out_pad};
  for (int64_t y = 0; y < c.out_h; ++y) {
    for (int64_t x = 0; x < c.out_w; ++x) std::copy_n(init, c.out_pad, row + x * c.out_pad);
    for_parts(c.out_pad / kLanes, kMaxVectors, [&](int64_t v0, int64_t nv) {
      for_parts(c.out_w, max_rows(static_cast<int>(nv)), [&](int64_t x0, int64_t rows) {
        kTiles[nv - 1][rows - 1](walk, in + (y * in_w + x0) * c.in_c, c.in_c, packed + v0 * kLanes,
                                 row + x0 * c.out_pad + v0 * kLanes, c.out_pad);
      });
    });
    for (int64_t x = 0; x < c.out_w; ++x)
      std::copy_n(row + x * c.out_pad, c.out_c, out + (y * c.out_w + x) * c.out_c);
  }
}

// dst[pad_top + y][pad_left + x][·] = src[y][x][·] for an image of
// height × width pixels of `channels`, rows of dst_width pixels; the rest of
// dst is left as it is (zeros).
void place(const float* src, int64_t height, int64_t width, int64_t channels, int64_t pad_top, int64_t pad_left,
           int64_t dst_width, float* dst) {
  for (int64_t y = 0; y < height; ++y)
    std::copy_n(src + y * width * channels, width * channels, dst + ((pad_top + y) * dst_width + pad_left) * channels);
}

// Runs fn(workspace, first_image, end_image) on each thread's share of the
// batch; returns how many threads ran.
template <class Fn>
int on_threads(std::size_t threads, int64_t batch, Fn&& fn) {
  int used = 1;
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (t == 0) used = nt;
    fn(static_cast<std::size_t>(t), batch * t / nt, batch * (t + 1) / nt);
  }
  return used;
}

}  // namespace

bool DirectConv::suits(const ConvGeometry& g) {
  if (g.stride != 1 || g.groups != 1 || g.channels > kMaxChannels || g.filters > kMaxFilters || g.kernel > kMaxKernel)
    return false;
  const int64_t bottom = g.out_height + g.kernel - 1 - g.height - g.pad_top;
  const int64_t right = g.out_width + g.kernel - 1 - g.width - g.pad_left;
  const auto below_kernel = [&](int64_t pad) { return pad >= 0 && pad < g.kernel; };
  return below_kernel(g.pad_top) && below_kernel(g.pad_left) && below_kernel(bottom) && below_kernel(right);
}

// Measured against oneDNN 2.6 pass by pass (`conv_algo_times --against
// auto`, one AVX-512 core, docs/benchmarks.md): oneDNN's kernels block
// channels by 16 and are faster than these wherever the blocks fill; ours
// won the input gradient with 3, 6 and 10 input channels (1.04–1.9×) and lost
// it with 8, 12, 16, 20 and 32; they won the forward pass and the weight
// gradient only at 10→20 (k5, ~10%), and lost them at 6→16, 3→16, 3→32
// (filters in whole blocks of 16) and from 12 channels up. A fixed rule, so
// that a run's bits do not depend on the machine's load.
DirectPasses DirectConv::passes(const ConvGeometry& g, ConvAlgo algo) {
  if (algo != ConvAlgo::automatic || !suits(g)) return {};
  const bool few_channels = g.channels <= 10 && g.channels % 8 != 0;
  const bool filters_off_blocks = g.filters % 16 != 0;
  return {.forward = few_channels && filters_off_blocks,
          .input_gradient = few_channels,
          .weight_gradient = few_channels && filters_off_blocks};
}

DirectConv::DirectConv(const ConvGeometry& g, DirectPasses passes)
    : g_(g),
      passes_(passes),
      pad_bottom_(g.out_height + g.kernel - 1 - g.height - g.pad_top),
      pad_right_(g.out_width + g.kernel - 1 - g.width - g.pad_left),
      filters_padded_(round_up(g.filters, kLanes)),
      taps_padded_(round_up(g.kernel * g.channels, kLanes)),
      // A fixed rule: the way that fills more of the lanes.
      weight_lanes_over_taps_(g.kernel * g.channels * filters_padded_ > g.filters * taps_padded_) {
  if (!suits(g)) throw std::logic_error("DirectConv built for a convolution it does not suit");
  const int64_t k = g.kernel, taps = k * k;
  if (passes_.forward) forward_weight_ = AlignedBuffer(static_cast<std::size_t>(taps * g.channels * filters_padded_));
  if (passes_.input_gradient) input_weight_ = AlignedBuffer(static_cast<std::size_t>(k * g.filters * taps_padded_));
  bias_ = AlignedBuffer(static_cast<std::size_t>(filters_padded_));
  // Zeroed once: the padding around each staged input is never written. The
  // input gradient's last tile adds (zero) lanes past the padded image.
  const int64_t input_floats = (g.out_height + k - 1) * (g.out_width + k - 1) * g.channels + kLanes;
  const int64_t row_floats = g.out_width * filters_padded_;
  threads_.resize(static_cast<std::size_t>(omp_get_max_threads()));
  for (Workspace& w : threads_) {
    w.image = AlignedBuffer(static_cast<std::size_t>(input_floats));
    if (passes_.input_gradient) w.scatter = AlignedBuffer(static_cast<std::size_t>(input_floats));
    w.row = AlignedBuffer(static_cast<std::size_t>(row_floats));
    if (passes_.weight_gradient) {
      w.grad = AlignedBuffer(static_cast<std::size_t>(g.out_height * g.out_width * filters_padded_));
      w.sums = AlignedBuffer(static_cast<std::size_t>(
          k * std::max(k * g.channels * filters_padded_, g.filters * taps_padded_) + filters_padded_));
    }
  }
}

void DirectConv::prepare(const float* weight) {
  const int64_t k = g_.kernel, c_count = g_.channels;
  for (int64_t o = 0; o < g_.filters; ++o)
    for (int64_t c = 0; c < c_count; ++c)
      for (int64_t kh = 0; kh < k; ++kh)
        for (int64_t kw = 0; kw < k; ++kw) {
          const float v = weight[((o * c_count + c) * k + kh) * k + kw];
          const int64_t tap = kw * c_count + c;
          if (passes_.forward) forward_weight_.data()[(kh * k * c_count + tap) * filters_padded_ + o] = v;
          if (passes_.input_gradient) input_weight_.data()[(kh * g_.filters + o) * taps_padded_ + tap] = v;
        }
}

// The image padded with zeros, or the image itself when it has no padding
// and no reads past its end are wanted (the staged copy has a vector's slack).
const float* DirectConv::stage_input(Workspace& w, const float* image, bool slack) const {
  if (!slack && g_.pad_top == 0 && g_.pad_left == 0 && pad_bottom_ == 0 && pad_right_ == 0) return image;
  place(image, g_.height, g_.width, g_.channels, g_.pad_top, g_.pad_left, g_.out_width + g_.kernel - 1,
        w.image.data());
  return w.image.data();
}

void DirectConv::forward(const float* src, const float* weight, const float* bias, float* dst) {
  (void)weight;  // packed by prepare()
  if (bias) std::copy_n(bias, g_.filters, bias_.data());  // the padded lanes stay zero
  const Convolve c{.kernel = g_.kernel, .in_c = g_.channels, .out_h = g_.out_height, .out_w = g_.out_width,
                   .out_c = g_.filters, .out_pad = filters_padded_};
  const int64_t in_image = g_.height * g_.width * g_.channels, out_image = g_.out_height * g_.out_width * g_.filters;
  on_threads(threads_.size(), g_.batch, [&](std::size_t t, int64_t first, int64_t end) {
    Workspace& w = threads_[t];
    for (int64_t n = first; n < end; ++n)
      convolve_image(c, stage_input(w, src + n * in_image, false), forward_weight_.data(), bias_.data(), w.row.data(),
                     dst + n * out_image);
  });
}

void DirectConv::input_gradient(const float* diff_dst, const float* weight, float* diff_src) {
  (void)weight;  // packed by prepare()
  const int64_t k = g_.kernel, tp = taps_padded_, fp_out = g_.filters, in_w = g_.out_width + k - 1;
  const int64_t in_image = g_.height * g_.width * g_.channels, out_image = g_.out_height * g_.out_width * fp_out;
  // Rows: R output pixels of one row; lanes: the taps (kw, c) of kernel row
  // kh, which land on k·C contiguous floats of the padded input's row
  // y + kh. A tile gathers everything row iy of the image receives: the
  // rows y = iy − kh of dY, over kh and the filters.
  on_threads(threads_.size(), g_.batch, [&](std::size_t t, int64_t first, int64_t end) {
    Workspace& w = threads_[t];
    float* padded = w.scatter.data();  // [in_h][in_w][C], and the lanes past the last tap's
    for (int64_t n = first; n < end; ++n) {
      std::fill_n(padded, w.scatter.size(), 0.0f);
      const float* dy = diff_dst + n * out_image;
      for (int64_t iy = g_.pad_top; iy < g_.pad_top + g_.height; ++iy) {
        const int64_t kh_first = std::max<int64_t>(0, iy - (g_.out_height - 1)), kh_last = std::min(k - 1, iy);
        const Walk walk{.segments = kh_last - kh_first + 1, .length = g_.filters, .a_segment = -g_.out_width * fp_out,
                        .a_step = 1, .b_segment = g_.filters * tp, .b_step = tp};
        for_parts(tp / kLanes, kMaxVectors, [&](int64_t v0, int64_t nv) {
          for_parts(g_.out_width, max_rows(static_cast<int>(nv)), [&](int64_t x0, int64_t rows) {
            kTiles[nv - 1][rows - 1](walk, dy + ((iy - kh_first) * g_.out_width + x0) * fp_out, fp_out,
                                     input_weight_.data() + kh_first * g_.filters * tp + v0 * kLanes,
                                     padded + (iy * in_w + x0) * g_.channels + v0 * kLanes, g_.channels);
          });
        });
      }
      // The image without its padding.
      float* dx = diff_src + n * in_image;
      for (int64_t y = 0; y < g_.height; ++y)
        std::copy_n(padded + ((g_.pad_top + y) * in_w + g_.pad_left) * g_.channels, g_.width * g_.channels,
                    dx + y * g_.width * g_.channels);
    }
  });
}

void DirectConv::weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) {
  const int64_t k = g_.kernel, taps = k * g_.channels, in_w = g_.out_width + k - 1, pixels = g_.out_height * g_.out_width;
  const int64_t in_image = g_.height * g_.width * g_.channels, out_image = pixels * g_.filters;
  const int64_t fp = filters_padded_, tp = taps_padded_, o_count = g_.filters;
  // Both ways sum over the image's pixels, row by row. Lanes over the
  // filters: rows are the taps (kw, c) of one kernel row; lanes over those
  // taps (k·C contiguous floats of an input row, the lanes past them read
  // the next pixels' and are dropped): rows are the filters.
  const Walk by_filters{.segments = g_.out_height, .length = g_.out_width, .a_segment = in_w * g_.channels,
                        .a_step = g_.channels, .b_segment = g_.out_width * fp, .b_step = fp};
  const Walk by_taps{.segments = g_.out_height, .length = g_.out_width, .a_segment = g_.out_width * o_count,
                     .a_step = o_count, .b_segment = in_w * g_.channels, .b_step = g_.channels};
  const int64_t bias_at = k * std::max(taps * fp, o_count * tp);
  const int used = on_threads(threads_.size(), g_.batch, [&](std::size_t t, int64_t first, int64_t end) {
    Workspace& w = threads_[t];
    float* sums = w.sums.data();
    std::fill_n(sums, w.sums.size(), 0.0f);
    for (int64_t n = first; n < end; ++n) {
      const float* in = stage_input(w, src + n * in_image, weight_lanes_over_taps_);
      const float* dy = diff_dst + n * out_image;
      // dY with its channels padded to whole vectors (the padded lanes stay zero).
      for (int64_t p = 0; p < pixels; ++p) std::copy_n(dy + p * o_count, o_count, w.grad.data() + p * fp);
      for (int64_t kh = 0; kh < k; ++kh) {
        const float* in_row = in + kh * in_w * g_.channels;
        if (weight_lanes_over_taps_) {
          for_parts(tp / kLanes, kMaxVectors, [&](int64_t v0, int64_t nv) {
            for_parts(o_count, max_rows(static_cast<int>(nv)), [&](int64_t o0, int64_t rows) {
              kTiles[nv - 1][rows - 1](by_taps, dy + o0, 1, in_row + v0 * kLanes,
                                       sums + (kh * o_count + o0) * tp + v0 * kLanes, tp);
            });
          });
          continue;
        }
        for_parts(fp / kLanes, kMaxVectors, [&](int64_t v0, int64_t nv) {
          for_parts(taps, max_rows(static_cast<int>(nv)), [&](int64_t j0, int64_t rows) {
            kTiles[nv - 1][rows - 1](by_filters, in_row + j0, 1, w.grad.data() + v0 * kLanes,
                                     sums + (kh * taps + j0) * fp + v0 * kLanes, fp);
          });
        });
      }
      for (int64_t p = 0; p < pixels; ++p)
        for (int64_t v = 0; v < fp; v += kLanes)
          simd::store(sums + bias_at + v, simd::load<V>(sums + bias_at + v) + simd::load<V>(w.grad.data() + p * fp + v));
    }
  });
  // The threads' sums in thread order, back to [O][C][k][k].
  const auto total = [&](int64_t at) {
    float sum = 0;
    for (int t = 0; t < used; ++t) sum += threads_[static_cast<std::size_t>(t)].sums.data()[at];
    return sum;
  };
  for (int64_t o = 0; o < o_count; ++o) {
    for (int64_t c = 0; c < g_.channels; ++c)
      for (int64_t kh = 0; kh < k; ++kh)
        for (int64_t kw = 0; kw < k; ++kw) {
          const int64_t tap = kw * g_.channels + c;
          dw[((o * g_.channels + c) * k + kh) * k + kw] =
              total(weight_lanes_over_taps_ ? (kh * o_count + o) * tp + tap : (kh * taps + tap) * fp + o);
        }
    if (db) db[o] = total(bias_at + o);
  }
}

}  // namespace convoy::cpu
