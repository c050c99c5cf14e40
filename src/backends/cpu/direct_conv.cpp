#include "backends/cpu/direct_conv.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <utility>

#include "backends/cpu/parts.h"
#include "backends/cpu/planes.h"
#include "backends/cpu/simd.h"

namespace convoy::cpu {
namespace {

using V = simd::Vec;
constexpr int64_t kLanes = simd::kLanes;
// The forward pass's shifted planes per thread at most (1 MiB), else its
// lanes stay over the filters.
constexpr int64_t kMaxShiftedFloats = int64_t{1} << 18;
constexpr int kRegisters = simd::kRegisters;
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
    // Two steps per loop: walks are short (8 steps per row in the weight
    // gradient at 12×12 → 8×8) and the loop's own instructions showed
    // (3% faster forward and weight gradient there; 4 gained nothing more).
#pragma GCC unroll 2
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
    for (int64_t x = 0; x < c.out_w; ++x) simd::copy_row(init, c.out_pad, row + x * c.out_pad);
    for_parts(c.out_pad / kLanes, kMaxVectors, [&](int64_t v0, int64_t nv) {
      for_parts(c.out_w, max_rows(static_cast<int>(nv)), [&](int64_t x0, int64_t rows) {
        kTiles[nv - 1][rows - 1](walk, in + (y * in_w + x0) * c.in_c, c.in_c, packed + v0 * kLanes,
                                 row + x0 * c.out_pad + v0 * kLanes, c.out_pad);
      });
    });
    for (int64_t x = 0; x < c.out_w; ++x)
      simd::copy_row(row + x * c.out_pad, c.out_c, out + (y * c.out_w + x) * c.out_c);
  }
}

// dst[pad_top + y][pad_left + x][·] = src[y][x][·] for an image of
// height × width pixels of `channels`, rows of dst_width pixels; the rest of
// dst is left as it is (zeros).
void place(const float* src, int64_t height, int64_t width, int64_t channels, int64_t pad_top, int64_t pad_left,
           int64_t dst_width, float* dst) {
  for (int64_t y = 0; y < height; ++y)
    simd::copy_row(src + y * width * channels, width * channels,
                   dst + ((pad_top + y) * dst_width + pad_left) * channels);
}

// 0, 1, 2, … in the lanes: `lane_numbers() < n` keeps the first n.
V lane_numbers() {
  V lane{};
  for (int i = 0; i < kLanes; ++i) lane[i] = static_cast<float>(i);
  return lane;
}

// dst[r][0..padded) = src[r][0..count) then zeros, for `rows` rows of
// `count` floats (padded: count rounded up to the lanes). Whole vectors
// where they stay inside src, their lanes past `count` zeroed; a few floats
// at a time would each be a call to memmove.
void pad_rows(const float* src, int64_t rows, int64_t count, int64_t padded, float* dst) {
  const V lane = lane_numbers();
  int64_t r = 0;
  for (; r < rows && r * count + padded <= rows * count; ++r)
    for (int64_t v = 0; v < padded; v += kLanes) {
      const V x = simd::load<V>(src + r * count + v);
      simd::store(dst + r * padded + v, lane < static_cast<float>(count - v) ? x : V{});
    }
  for (; r < rows; ++r) simd::copy_row(src + r * count, count, dst + r * padded);
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
      taps_whole_(g.kernel * g.channels / kLanes * kLanes),
      taps_rest_(g.kernel * g.channels - taps_whole_),
      rest_padded_(round_up(g.kernel * taps_rest_, kLanes)),
      pixels_padded_(round_up(g.out_height * g.out_width, kLanes)) {
  if (!suits(g)) throw std::logic_error("DirectConv built for a convolution it does not suit");
  const int64_t k = g.kernel, taps = k * k, row_taps = k * g.channels, o_count = g.filters;
  // A fixed rule: the way with the fewest vector FMAs per output pixel,
  // counting one per float the split ways restage or scatter.
  const int64_t filter_vectors = filters_padded_ / kLanes, whole_vectors = taps_whole_ / kLanes;
  const bool can_split = whole_vectors > 0 && taps_rest_ > 0;
  const int64_t by_taps = k * o_count * (taps_padded_ / kLanes), by_filters = k * row_taps * filter_vectors;
  const int64_t weight_split = k * o_count * whole_vectors + k * taps_rest_ * (filter_vectors + 1);
  weight_lanes_ = by_filters > by_taps ? WeightLanes::taps : WeightLanes::filters;
  if (can_split && weight_split < std::min(by_taps, by_filters)) weight_lanes_ = WeightLanes::split;
  const int64_t input_split = k * o_count * whole_vectors + o_count * (rest_padded_ / kLanes) + 2 * k * taps_rest_;
  input_split_ = can_split && input_split < by_taps;
  // The forward pass: lanes over the filters, or over the output pixels
  // with the image restaged (its planar copy, the shifted planes) and the
  // output transposed, one per float.
  const int64_t pixels = g.out_height * g.out_width, in_h = g.out_height + k - 1, in_w = g.out_width + k - 1;
  const int64_t shifted_floats = row_taps * in_h * g.out_width;
  const int64_t over_filters = pixels * taps * g.channels * filter_vectors;
  const int64_t over_pixels = o_count * (pixels_padded_ / kLanes) * taps * g.channels + g.height * g.width * g.channels +
                              row_taps * in_h * round_up(g.out_width, kLanes) / kLanes + pixels * o_count;
  forward_pixels_ = over_pixels < over_filters && shifted_floats <= kMaxShiftedFloats;
  if (passes_.forward) forward_weight_ = AlignedBuffer(static_cast<std::size_t>(taps * g.channels * filters_padded_));
  if (passes_.input_gradient) input_weight_ = AlignedBuffer(static_cast<std::size_t>(k * g.filters * taps_padded_));
  if (passes_.input_gradient && input_split_)
    rest_weight_ = AlignedBuffer(static_cast<std::size_t>(g.filters * rest_padded_));
  bias_ = AlignedBuffer(static_cast<std::size_t>(filters_padded_));
  // Zeroed once: the padding around each staged input is never written. The
  // input gradient's last tile adds (zero) lanes past the padded image.
  const int64_t input_floats = (g.out_height + k - 1) * (g.out_width + k - 1) * g.channels + kLanes;
  const int64_t row_floats = g.out_width * filters_padded_;
  const bool over_pixels_buffers = passes_.forward && forward_pixels_;
  const bool weight_rest = passes_.weight_gradient && weight_lanes_ == WeightLanes::split;
  const bool input_rest = passes_.input_gradient && input_split_;
  threads_.resize(static_cast<std::size_t>(omp_get_max_threads()));
  for (Workspace& w : threads_) {
    w.image = AlignedBuffer(static_cast<std::size_t>(input_floats));
    if (passes_.input_gradient) w.scatter = AlignedBuffer(static_cast<std::size_t>(input_floats));
    w.row = AlignedBuffer(static_cast<std::size_t>(row_floats));
    if (over_pixels_buffers) {
      // A vector's slack: rows are read and written a whole vector at a time.
      w.planar = AlignedBuffer(static_cast<std::size_t>(g.channels * in_h * in_w + kLanes));
      w.shifted = AlignedBuffer(static_cast<std::size_t>(shifted_floats + kLanes));
      w.planes = AlignedBuffer(static_cast<std::size_t>(o_count * pixels_padded_));
    }
    if (passes_.weight_gradient) {
      w.grad = AlignedBuffer(static_cast<std::size_t>(g.out_height * g.out_width * filters_padded_));
      w.sums = AlignedBuffer(static_cast<std::size_t>(
          k * std::max(row_taps * filters_padded_, o_count * taps_padded_) + (k * taps_rest_ + 1) * filters_padded_));
    }
    if (weight_rest || input_rest)
      w.rest = AlignedBuffer(static_cast<std::size_t>(
          pixels * std::max(weight_rest ? k * taps_rest_ : 0, input_rest ? rest_padded_ : 0) + kLanes));
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
          if (passes_.forward && forward_pixels_) forward_weight_.data()[(o * k + kh) * k * c_count + tap] = v;
          else if (passes_.forward) forward_weight_.data()[(kh * k * c_count + tap) * filters_padded_ + o] = v;
          if (passes_.input_gradient) input_weight_.data()[(kh * g_.filters + o) * taps_padded_ + tap] = v;
          if (passes_.input_gradient && input_split_ && tap >= taps_whole_)
            rest_weight_.data()[o * rest_padded_ + kh * taps_rest_ + tap - taps_whole_] = v;
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

// rest[y][x][kh][j] = in[y + kh][x][taps_whole_ + j]: the split taps of each
// output pixel, in one row per pixel, copied inline as the few floats they
// are (two 8-byte moves for the seed conv's 2): std::copy_n would be a call
// to memmove, and a whole vector per (pixel, kh) stores 64 bytes, mostly
// across a cache line, to keep 8. Reads nothing past the last pixel's taps,
// so `in` may be the unstaged image.
// (Members read into locals: the stores, through memcpy, may alias them.)
void DirectConv::gather_rest(const float* in, float* rest) const {
  const int64_t k = g_.kernel, c = g_.channels, in_w = g_.out_width + k - 1, out_h = g_.out_height,
                out_w = g_.out_width, count = taps_rest_;
  in += taps_whole_;
  for (int64_t y = 0; y < out_h; ++y)
    for (int64_t x = 0; x < out_w; ++x)
      for (int64_t kh = 0; kh < k; ++kh, rest += count)
        simd::copy_short<kLanes / 2>(in + ((y + kh) * in_w + x) * c, count, rest);
}

// The reverse, added: padded[y + kh][x][taps_whole_ + j] += rest[y][x][kh][j]
// (rows of rest_padded_), a vector per (pixel, kh) whose lanes past the
// taps add −0 (x + −0 is x for every x, −0 too). Pixels a vector apart in
// turn, and each such pass over all k kernel rows before the next: a load
// that overlaps a store still in the store buffer waits until it reaches
// memory (the passes kernel row by kernel row stalled on every second
// pass's loads). Each padded float takes its real adds in ascending y, the
// order every loop order here keeps.
void DirectConv::scatter_rest(const float* rest, float* padded) const {
  const int64_t k = g_.kernel, c = g_.channels, in_w = g_.out_width + k - 1;
  const int64_t apart = (kLanes + c - 1) / c;  // pixels whose vectors do not overlap
  const auto taps = lane_numbers() < static_cast<float>(taps_rest_);
  const V none = simd::broadcast<V>(-0.0f);
  const int64_t out_h = g_.out_height, out_w = g_.out_width, row = rest_padded_, count = taps_rest_;
  padded += taps_whole_;
  for (int64_t y = 0; y < out_h; ++y)
    for (int64_t first = 0; first < std::min(apart, out_w); ++first)
      for (int64_t kh = 0; kh < k; ++kh)
        for (int64_t x = first; x < out_w; x += apart) {
          float* to = padded + ((y + kh) * in_w + x) * c;
          const V add = simd::load<V>(rest + (y * out_w + x) * row + kh * count);
          simd::store(to, simd::load<V>(to) + (taps ? add : none));
        }
}

// w.shifted[kw][c][y][x] = padded[y][x + kw][c] for the padded input's rows
// y and the output's columns x, through w.planar = padded[c][y][x'] (its
// padding zeroed once, never written). Each shifted row is copied a vector
// at a time, in ascending order: a vector's lanes past the row land on the
// next row before it is written (or on the slack).
void DirectConv::shift_planes(Workspace& w, const float* image) const {
  const int64_t k = g_.kernel, c_count = g_.channels, in_h = g_.out_height + k - 1, in_w = g_.out_width + k - 1;
  const int64_t out_w = g_.out_width;
  float* planar = w.planar.data();
  for (int64_t y = 0; y < g_.height; ++y)
    to_planes(image + y * g_.width * c_count, g_.width, c_count, planar + (g_.pad_top + y) * in_w + g_.pad_left,
              in_h * in_w);
  // Rows of at most half a vector (8 columns on AVX-512) by half vectors:
  // whole ones would store across a cache line every other row.
  const auto shift = [&]<class R>() {
    constexpr int64_t lanes = simd::lanes<R>;
    float* to = w.shifted.data();
    for (int64_t kw = 0; kw < k; ++kw)
      for (int64_t c = 0; c < c_count; ++c)
        for (int64_t y = 0; y < in_h; ++y, to += out_w) {
          const float* from = planar + (c * in_h + y) * in_w + kw;
          for (int64_t x = 0; x < out_w; x += lanes) simd::store(to + x, simd::load<R>(from + x));
        }
  };
  if (out_w <= kLanes / 2) shift.template operator()<simd::VecOf<kLanes / 2>>();
  else shift.template operator()<V>();
}

// One image's forward pass with lanes over its output pixels p = y·Wo + x:
// planes[o][p] = b[o] + Σ_kh Σ_(kw,c) Wp[o][kh][kw,c] · shifted[kw][c][kh·Wo + p]
// (tap (kw, c)'s plane a plane's size apart, kernel row kh a row apart),
// then out[p][o] = planes[o][p]. The lanes past the last pixel read the
// next plane's (or the slack's) floats and are dropped.
void DirectConv::forward_over_pixels(Workspace& w, const float* image, float* out) const {
  const int64_t k = g_.kernel, c_count = g_.channels, o_count = g_.filters, pp = pixels_padded_;
  const int64_t pixels = g_.out_height * g_.out_width, plane = (g_.out_height + k - 1) * g_.out_width;
  const int64_t row_taps = k * c_count;
  shift_planes(w, image);
  float* planes = w.planes.data();
  for (int64_t o = 0; o < o_count; ++o) std::fill_n(planes + o * pp, pp, bias_.data()[o]);
  const Walk walk{.segments = k, .length = row_taps, .a_segment = row_taps, .a_step = 1, .b_segment = g_.out_width,
                  .b_step = plane};
  for_parts(pp / kLanes, kMaxVectors, [&](int64_t v0, int64_t nv) {
    for_parts(o_count, max_rows(static_cast<int>(nv)), [&](int64_t o0, int64_t rows) {
      kTiles[nv - 1][rows - 1](walk, forward_weight_.data() + o0 * k * row_taps, k * row_taps,
                               w.shifted.data() + v0 * kLanes, planes + o0 * pp + v0 * kLanes, pp);
    });
  });
  from_planes(planes, pp, pixels, o_count, out);
}

void DirectConv::forward(const float* src, const float* weight, const float* bias, float* dst) {
  (void)weight;  // packed by prepare()
  if (bias) std::copy_n(bias, g_.filters, bias_.data());  // the padded lanes stay zero
  const Convolve c{.kernel = g_.kernel, .in_c = g_.channels, .out_h = g_.out_height, .out_w = g_.out_width,
                   .out_c = g_.filters, .out_pad = filters_padded_};
  const int64_t in_image = g_.height * g_.width * g_.channels, out_image = g_.out_height * g_.out_width * g_.filters;
  on_threads(threads_.size(), g_.batch, [&](std::size_t t, int64_t first, int64_t end) {
    Workspace& w = threads_[t];
    if (forward_pixels_) {
      for (int64_t n = first; n < end; ++n) forward_over_pixels(w, src + n * in_image, dst + n * out_image);
      return;
    }
    for (int64_t n = first; n < end; ++n)
      convolve_image(c, stage_input(w, src + n * in_image, false), forward_weight_.data(), bias_.data(), w.row.data(),
                     dst + n * out_image);
  });
}

void DirectConv::input_gradient(const float* diff_dst, const float* weight, float* diff_src) {
  (void)weight;  // packed by prepare()
  const int64_t k = g_.kernel, tp = taps_padded_, fp_out = g_.filters, in_w = g_.out_width + k - 1;
  const int64_t pixels = g_.out_height * g_.out_width;
  const int64_t in_image = g_.height * g_.width * g_.channels, out_image = pixels * fp_out;
  const int64_t tile_vectors = (input_split_ ? taps_whole_ : tp) / kLanes;
  // The split taps' sums per output pixel: rows are pixels, lanes (kh, rest).
  const Walk rest_walk{.segments = 1, .length = g_.filters, .a_segment = 0, .a_step = 1, .b_segment = 0,
                       .b_step = rest_padded_};
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
        for_parts(tile_vectors, kMaxVectors, [&](int64_t v0, int64_t nv) {
          for_parts(g_.out_width, max_rows(static_cast<int>(nv)), [&](int64_t x0, int64_t rows) {
            kTiles[nv - 1][rows - 1](walk, dy + ((iy - kh_first) * g_.out_width + x0) * fp_out, fp_out,
                                     input_weight_.data() + kh_first * g_.filters * tp + v0 * kLanes,
                                     padded + (iy * in_w + x0) * g_.channels + v0 * kLanes, g_.channels);
          });
        });
      }
      if (input_split_) {
        float* rest = w.rest.data();
        std::fill_n(rest, pixels * rest_padded_, 0.0f);
        for_parts(rest_padded_ / kLanes, kMaxVectors, [&](int64_t v0, int64_t nv) {
          for_parts(pixels, max_rows(static_cast<int>(nv)), [&](int64_t p0, int64_t rows) {
            kTiles[nv - 1][rows - 1](rest_walk, dy + p0 * fp_out, fp_out, rest_weight_.data() + v0 * kLanes,
                                     rest + p0 * rest_padded_ + v0 * kLanes, rest_padded_);
          });
        });
        scatter_rest(rest, padded);
      }
      // The image without its padding.
      float* dx = diff_src + n * in_image;
      for (int64_t y = 0; y < g_.height; ++y)
        simd::copy_row(padded + ((g_.pad_top + y) * in_w + g_.pad_left) * g_.channels, g_.width * g_.channels,
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
  // the next pixels' and are dropped): rows are the filters. Split: the
  // taps in whole vectors by the latter, the rest (restaged, one row per
  // pixel) by the former.
  const Walk by_filters{.segments = g_.out_height, .length = g_.out_width, .a_segment = in_w * g_.channels,
                        .a_step = g_.channels, .b_segment = g_.out_width * fp, .b_step = fp};
  const Walk by_taps{.segments = g_.out_height, .length = g_.out_width, .a_segment = g_.out_width * o_count,
                     .a_step = o_count, .b_segment = in_w * g_.channels, .b_step = g_.channels};
  const int64_t rest_taps = k * taps_rest_;
  const Walk rest_by_filters{.segments = 1, .length = pixels, .a_segment = 0, .a_step = rest_taps, .b_segment = 0,
                             .b_step = fp};
  const int64_t tap_vectors = (weight_lanes_ == WeightLanes::split ? taps_whole_ : tp) / kLanes;
  const int64_t rest_at = k * std::max(taps * fp, o_count * tp), bias_at = rest_at + rest_taps * fp;
  const int used = on_threads(threads_.size(), g_.batch, [&](std::size_t t, int64_t first, int64_t end) {
    Workspace& w = threads_[t];
    float* sums = w.sums.data();
    std::fill_n(sums, w.sums.size(), 0.0f);
    for (int64_t n = first; n < end; ++n) {
      // Lanes over all taps read past the last pixel's; split, the tiles
      // stop at its last whole vector and gather_rest minds the end.
      const float* in = stage_input(w, src + n * in_image, weight_lanes_ == WeightLanes::taps);
      const float* dy = diff_dst + n * out_image;
      // dY with its channels padded to whole vectors (the padded lanes stay zero).
      pad_rows(dy, pixels, o_count, fp, w.grad.data());
      for (int64_t kh = 0; kh < k; ++kh) {
        const float* in_row = in + kh * in_w * g_.channels;
        if (weight_lanes_ != WeightLanes::filters) {
          for_parts(tap_vectors, kMaxVectors, [&](int64_t v0, int64_t nv) {
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
      if (weight_lanes_ == WeightLanes::split) {
        gather_rest(in, w.rest.data());
        for_parts(fp / kLanes, kMaxVectors, [&](int64_t v0, int64_t nv) {
          for_parts(rest_taps, max_rows(static_cast<int>(nv)), [&](int64_t j0, int64_t rows) {
            kTiles[nv - 1][rows - 1](rest_by_filters, w.rest.data() + j0, 1, w.grad.data() + v0 * kLanes,
                                     sums + rest_at + j0 * fp + v0 * kLanes, fp);
          });
        });
      }
      // The bias's sums in a register over the pixels (through memory, each
      // add waited on the store before it), added in the same order.
      for (int64_t v = 0; v < fp; v += kLanes) {
        V bias_sum = simd::load<V>(sums + bias_at + v);
        for (int64_t p = 0; p < pixels; ++p) bias_sum += simd::load<V>(w.grad.data() + p * fp + v);
        simd::store(sums + bias_at + v, bias_sum);
      }
    }
  });
  // The threads' sums in thread order, back to [O][C][k][k].
  const auto total = [&](int64_t at) {
    float sum = 0;
    for (int t = 0; t < used; ++t) sum += threads_[static_cast<std::size_t>(t)].sums.data()[at];
    return sum;
  };
  const int64_t in_tap_lanes = weight_lanes_ == WeightLanes::split ? taps_whole_ : taps;
  const auto at = [&](int64_t o, int64_t kh, int64_t tap) {
    if (weight_lanes_ == WeightLanes::filters) return (kh * taps + tap) * fp + o;
    if (tap < in_tap_lanes) return (kh * o_count + o) * tp + tap;
    return rest_at + (kh * taps_rest_ + tap - taps_whole_) * fp + o;
  };
  for (int64_t o = 0; o < o_count; ++o) {
    for (int64_t c = 0; c < g_.channels; ++c)
      for (int64_t kh = 0; kh < k; ++kh)
        for (int64_t kw = 0; kw < k; ++kw)
          dw[((o * g_.channels + c) * k + kh) * k + kw] = total(at(o, kh, kw * g_.channels + c));
    if (db) db[o] = total(bias_at + o);
  }
}

}  // namespace convoy::cpu
