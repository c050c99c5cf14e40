// Max-pool over NHWC activations: our own kernel, since oneDNN 2.6's pooling
// is slow for these small channel counts (4.4 ms for the seed's first pool on
// 2 cores, against ~0.1 ms of memory traffic). The forward pass records which
// window position won (first maximum, as PyTorch) in one byte per output; the
// backward pass routes each output gradient there. Padding never wins.
//   src [N, H, W, C], dst [N, Ho, Wo, C]
//
// A window is walked as a list of its positions inside the image ("taps"),
// each an offset from the window's corner, made once for the windows wholly
// inside the image: per-window index arithmetic, not memory, was what the
// kernel spent its time on. From 4 channels on every tap takes a vector of
// W channels at a time (simd.h, one source for every copy: W the widest of
// 16, 8, 4 that the copy has and the channels fill), up to 4 blocks together,
// the last block overlapping the one before when W does not divide C (C = 10,
// W = 8: channels 0-7 and 2-9, the overlap computed twice, identically), so
// no channel takes a scalar path. There, when
// windows do not overlap (stride ≥ kernel, as the usual 2×2/2), the backward
// pass writes every input gradient exactly once — the output gradient where
// the window's maximum was, zero elsewhere — instead of clearing the whole
// input gradient and adding into it; when they overlap (ResNet's 3×3/2 stem
// pool), it gathers each input gradient from the windows that cover its
// pixel, in window order: the sums the scatter made, written once. Rows of
// whole disjoint 2×2 or 3×3 windows (the seed CNN's pools) take
// straight-line kernels over the channels rounded up to a power of two
// instead (max_row_wide): C = 10 is one 16-lane vector in the AVX-512 copy,
// forward 1.5× and backward 1.1–1.5× faster (docs/benchmarks.md).
// A ReLU that is the pool's only reader (the seed CNN's pool → ReLU) runs in
// the pool's op (conv_pool_op.h): the ReLU's output is written from the
// pooled rows while they are in cache, and its output gradient masked an
// image at a time before the routing, so the ReLU's two passes go.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "backends/cpu/max_pool_kernels.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/pool_geometry.h"
#include "backends/cpu/pool_lanes.h"
#include "backends/cpu/relu_math.h"
#include "backends/cpu/simd.h"
#include "convoy/core/error.h"

namespace convoy::cpu {
namespace {

// The positions of one window that lie inside the image, in window order
// (row-major, so the first maximum is PyTorch's); offsets[p] is position p's
// distance in floats from the window's corner, which may lie in the padding.
struct Taps {
  const uint8_t* positions;
  int64_t count;
  const int64_t* offsets;
};

// The kernels of rows of whole disjoint windows (max_row_wide and
// route_row_wide, below), for the geometries wide_rows picks.
using MaxRowFn = void (*)(const float*, int64_t, int64_t, int64_t, float*, uint8_t*);
using RouteRowFn = void (*)(const float*, const uint8_t*, int64_t, int64_t, float*, int64_t);
struct WideRows {
  MaxRowFn max = nullptr;  // null: no wide rows for this geometry
  RouteRowFn route = nullptr;
};

// What the row kernels read: passed by value and kept in locals, since a
// vector store may alias any memory and values read through a pointer (or
// `this`) would be reloaded after every store.
struct PoolPlan {
  PoolGeometry g;
  const uint8_t* all_positions;  // 0, 1, ..., k² - 1
  const int64_t* offsets;        // of each window position from the window's corner, in floats
  int64_t width;                 // channels per vector (vector_width), 0: one at a time
  WideRows wide;                 // the wide rows' kernels, null when none

  // Where window (oy, ox)'s first position would be, in floats from the
  // image's start (negative in the padding).
  int64_t corner(int64_t oy, int64_t ox) const { return ((oy * g.s - g.top) * g.w + ox * g.s - g.left) * g.c; }

  // The window's taps: all positions when it lies inside the image, else the
  // ones inside, listed in `local`.
  Taps taps(int64_t oy, int64_t ox, uint8_t* local) const {
    const int64_t y0 = g.y0(oy), y1 = g.y1(oy), x0 = g.x0(ox), x1 = g.x1(ox);
    const int64_t top = oy * g.s - g.top, left = ox * g.s - g.left;
    if (y1 - y0 == g.k && x1 - x0 == g.k) return {all_positions, g.k * g.k, offsets};
    int64_t count = 0;
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) local[count++] = static_cast<uint8_t>((iy - top) * g.k + (ix - left));
    return {local, count, offsets};
  }
};

constexpr int64_t kChunks = 4;  // channel blocks taken together

// Calls fn.template operator()<Chunks>() with Chunks = min(blocks, kChunks)
// known at compile time, so the blocks' registers can be unrolled.
template <class Fn>
void dispatch_chunks(int64_t blocks, Fn&& fn) {
  switch (std::min(blocks, kChunks)) {
    case 1: return fn.template operator()<1>();
    case 2: return fn.template operator()<2>();
    case 3: return fn.template operator()<3>();
    default: return fn.template operator()<4>();
  }
}

// The maximum over the taps for Lanes channels, Lanes a compile-time count:
// the running maxima and positions stay in registers (in the output arrays
// the compiler must reload them, as a byte store may alias the floats) and
// the selects compile to blends or conditional moves — a branch per
// comparison mispredicts half the time on real data. First maximum wins, as
// PyTorch. For fewer channels than the narrowest vector.
template <int64_t Lanes>
void max_lanes(const float* image, int64_t corner, const Taps& t, float* y, uint8_t* a) {
  float best[Lanes];
  int32_t where[Lanes];
  for (int64_t l = 0; l < Lanes; ++l) {
    best[l] = -std::numeric_limits<float>::infinity();
    where[l] = 0;
  }
  for (int64_t i = 0; i < t.count; ++i) {
    const int32_t pos = t.positions[i];
    const float* x = image + corner + t.offsets[pos];
    for (int64_t l = 0; l < Lanes; ++l) {
      const int32_t better = -static_cast<int32_t>(x[l] > best[l]);  // all ones or zero
      where[l] ^= (where[l] ^ pos) & better;
      best[l] = std::max(best[l], x[l]);  // x[l] only when greater: the same as the test above
    }
  }
  for (int64_t l = 0; l < Lanes; ++l) {
    y[l] = best[l];
    a[l] = static_cast<uint8_t>(where[l]);
  }
}

// The maximum over the taps for Chunks blocks of W channels from c0, the last
// block ending at channel c (it may overlap the one before: the same values).
template <int W, int Chunks>
void max_blocks(const float* image, int64_t corner, const Taps& t, int64_t c, int64_t c0, float* y, uint8_t* a) {
  using L = Lanes<W>;
  int64_t block[Chunks];
  typename L::F best[Chunks];
  typename L::I where[Chunks];
  for (int j = 0; j < Chunks; ++j) {
    block[j] = std::min<int64_t>(c0 + W * j, c - W);
    best[j] = simd::broadcast<typename L::F>(-std::numeric_limits<float>::infinity());
    where[j] = typename L::I{};
  }
  for (int64_t i = 0; i < t.count; ++i) {
    const int32_t p = t.positions[i];
    const float* x = image + corner + t.offsets[p];
    for (int j = 0; j < Chunks; ++j) take_greater<W>(simd::load<typename L::F>(x + block[j]), p, best[j], where[j]);
  }
  for (int j = 0; j < Chunks; ++j) {
    simd::store(y + block[j], best[j]);
    store_bytes<W>(a + block[j], where[j]);
  }
}

// One window's input gradients for Chunks blocks of W channels from c0: dy
// where the position won, zero elsewhere.
template <int W, int Chunks>
void route_blocks(const float* dy, const uint8_t* a, const Taps& t, int64_t c, int64_t c0, float* image,
                  int64_t corner) {
  using L = Lanes<W>;
  int64_t block[Chunks];
  typename L::F d[Chunks];
  typename L::I where[Chunks];
  for (int j = 0; j < Chunks; ++j) {
    block[j] = std::min<int64_t>(c0 + W * j, c - W);
    d[j] = simd::load<typename L::F>(dy + block[j]);
    where[j] = widen<W>(a + block[j]);
  }
  for (int64_t i = 0; i < t.count; ++i) {
    const int32_t p = t.positions[i];
    float* x = image + corner + t.offsets[p];
    const typename L::I pos = typename L::I{} + p;
    for (int j = 0; j < Chunks; ++j) simd::store(x + block[j], where[j] == pos ? d[j] : typename L::F{});
  }
}

// The input gradients of one image for Chunks blocks of W channels from c0
// (the last ending at channel c, possibly overlapping the one before: the
// same values), each gathered from the windows that cover its pixel: +0,
// then in window order each window's output gradient where its maximum was
// this pixel and +0 where it was not. That is the sum the windows' scatter
// into a cleared gradient made, term for term in the same order (adding +0
// changes no sum that starts at +0: no such sum is -0), so the bits are the
// same; but each gradient is written once, with no clearing pass and no
// read-modify-write per window. rows[iy], cols[ix]: the windows covering
// input row iy and column ix.
template <int W, int Chunks>
void gather_blocks(const PoolGeometry g, const WindowSpan* rows, const WindowSpan* cols, const float* dy,
                   const uint8_t* a, int64_t c0, float* dx) {
  using L = Lanes<W>;
  int64_t block[Chunks];
  for (int j = 0; j < Chunks; ++j) block[j] = std::min<int64_t>(c0 + W * j, g.c - W);
  for (int64_t iy = 0; iy < g.h; ++iy) {
    const WindowSpan r = rows[iy];
    for (int64_t ix = 0; ix < g.w; ++ix, dx += g.c) {
      const WindowSpan q = cols[ix];
      typename L::F sum[Chunks];
      for (int j = 0; j < Chunks; ++j) sum[j] = typename L::F{};
      for (int64_t oy = r.first; oy < r.end; ++oy)
        for (int64_t ox = q.first; ox < q.end; ++ox) {
          const int64_t o = (oy * g.ow + ox) * g.c;
          const typename L::I pos = typename L::I{} + static_cast<int32_t>((iy - oy * g.s + g.top) * g.k + ix -
                                                                            ox * g.s + g.left);
          for (int j = 0; j < Chunks; ++j)
            sum[j] += widen<W>(a + o + block[j]) == pos ? simd::load<typename L::F>(dy + o + block[j])
                                                         : typename L::F{};
        }
      for (int j = 0; j < Chunks; ++j) simd::store(dx + block[j], sum[j]);
    }
  }
}

// Rows of disjoint K×K windows (stride K) that lie wholly inside the image,
// each window but its row's last: the channels as NB vectors of WV lanes from
// channel 0 (WV = the channel count rounded up to a power of two, at most
// kLanes), so C = 10 takes one 16-lane vector in the AVX-512 copy instead of
// two overlapping 8-lane blocks, and the K² taps are straight-line code with
// no per-window tap list. The lanes past the last channel read the next
// pixel and write junk into the next output (forward) or the next input
// pixel (backward); that is always a position written later in the same row
// (the next tap, or the next window's first), which is why a row's last
// window takes the exact path instead, and rows never spill into each other
// (a row is one thread's). Same comparisons in the same order as max_blocks:
// the same bits.
template <int K, int WV, int NB>
void max_row_wide(const float* x, int64_t row, int64_t c, int64_t windows, float* y, uint8_t* a) {
  using L = Lanes<WV>;
  for (int64_t ox = 0; ox < windows; ++ox, x += K * c, y += c, a += c) {
    typename L::F best[NB];
    typename L::I where[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      best[j] = simd::broadcast<typename L::F>(-std::numeric_limits<float>::infinity());
      where[j] = typename L::I{};
    }
#pragma GCC unroll 9
    for (int p = 0; p < K * K; ++p) {
      const float* xp = x + p / K * row + p % K * c;
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) take_greater<WV>(simd::load<typename L::F>(xp + j * WV), p, best[j], where[j]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      simd::store(y + j * WV, best[j]);
      store_bytes<WV>(a + j * WV, where[j]);
    }
  }
}

// The backward pass of max_row_wide's windows: each tap's input gradients
// written once, dy where the tap won and zero elsewhere (as route_blocks).
template <int K, int WV, int NB>
void route_row_wide(const float* dy, const uint8_t* a, int64_t c, int64_t windows, float* x, int64_t row) {
  using L = Lanes<WV>;
  for (int64_t ox = 0; ox < windows; ++ox, x += K * c, dy += c, a += c) {
    typename L::F d[NB];
    typename L::I where[NB];
#pragma GCC unroll 4
    for (int j = 0; j < NB; ++j) {
      d[j] = simd::load<typename L::F>(dy + j * WV);
      where[j] = widen<WV>(a + j * WV);
    }
#pragma GCC unroll 9
    for (int p = 0; p < K * K; ++p) {
      float* xp = x + p / K * row + p % K * c;
      const typename L::I pos = typename L::I{} + p;
#pragma GCC unroll 4
      for (int j = 0; j < NB; ++j) simd::store(xp + j * WV, where[j] == pos ? d[j] : typename L::F{});
    }
  }
}

template <int K, int WV, int... NB>
WideRows wide_rows_of(int64_t blocks, std::integer_sequence<int, NB...>) {
  WideRows w;
  ((blocks == NB + 1 ? (void)(w = {&max_row_wide<K, WV, NB + 1>, &route_row_wide<K, WV, NB + 1>}) : void()), ...);
  return w;
}

// The wide rows' kernels for g, or none: disjoint windows (stride = kernel)
// of 2×2 or 3×3 from the image's corner (no padding before), 4 or more
// channels, at most 4 vectors of them. A fixed rule by shape.
WideRows wide_rows(const PoolGeometry& g) {
  if (g.s != g.k || (g.k != 2 && g.k != 3) || g.top != 0 || g.left != 0 || g.c < 4) return {};
  int64_t wv = 4;
  while (wv < g.c && wv < simd::kLanes) wv *= 2;
  const int64_t blocks = (g.c + wv - 1) / wv;
  if (blocks > 4) return {};
  constexpr auto nb = std::make_integer_sequence<int, 4>{};
  auto of_width = [&]<int WV> { return g.k == 2 ? wide_rows_of<2, WV>(blocks, nb) : wide_rows_of<3, WV>(blocks, nb); };
  if constexpr (simd::kLanes >= 16)
    if (wv == 16) return of_width.template operator()<16>();
  if constexpr (simd::kLanes >= 8)
    if (wv == 8) return of_width.template operator()<8>();
  return of_width.template operator()<4>();
}

// The widest vector of channels this copy runs that `channels` fill: 16, 8
// or 4 lanes; 0 below 4 channels (one channel at a time).
int64_t vector_width(int64_t channels) {
  for (int64_t w = simd::kLanes; w >= 4; w /= 2)
    if (channels >= w) return w;
  return 0;
}

// Calls fn.template operator()<W, Chunks>(c0) over the blocks of W channels
// (W = vector_width(c), at least 4), kChunks blocks at a time.
template <class Fn>
void over_blocks(int64_t width, int64_t c, Fn&& fn) {
  auto blocks = [&]<int W> {
    for (int64_t c0 = 0; c0 < c; c0 += W * kChunks)
      dispatch_chunks((c - c0 + W - 1) / W, [&]<int Chunks> { fn.template operator()<W, Chunks>(c0); });
  };
  if constexpr (simd::kLanes >= 16)
    if (width == 16) return blocks.template operator()<16>();
  if constexpr (simd::kLanes >= 8)
    if (width == 8) return blocks.template operator()<8>();
  blocks.template operator()<4>();
}

// The forward pass over output rows [r0, r1) (r = n * Ho + oy).
void max_rows(const PoolPlan plan, const float* src, float* dst, uint8_t* arg, int64_t r0, int64_t r1) {
  const PoolGeometry g = plan.g;
  const int64_t image = g.h * g.w * g.c;
  uint8_t local[256];
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = src + r / g.oh * image;
    const int64_t oy = r % g.oh;
    int64_t ox = 0;
    if (plan.wide.max && g.y1(oy) - g.y0(oy) == g.k) {
      const int64_t o = r * g.ow * g.c;
      plan.wide.max(x + plan.corner(oy, 0), g.w * g.c, g.c, g.ow - 1, dst + o, arg + o);
      ox = g.ow - 1;
    }
    for (; ox < g.ow; ++ox) {
      const int64_t o = (r * g.ow + ox) * g.c, corner = plan.corner(oy, ox);
      const Taps t = plan.taps(oy, ox, local);
      if (plan.width) {
        over_blocks(plan.width, g.c, [&]<int W, int Chunks>(int64_t c0) {
          max_blocks<W, Chunks>(x, corner, t, g.c, c0, dst + o, arg + o);
        });
        continue;
      }
      int64_t c0 = 0;
      for (; c0 + 16 <= g.c; c0 += 16) max_lanes<16>(x, corner + c0, t, dst + o + c0, arg + o + c0);
      for (; c0 + 8 <= g.c; c0 += 8) max_lanes<8>(x, corner + c0, t, dst + o + c0, arg + o + c0);
      for (; c0 < g.c; ++c0) max_lanes<1>(x, corner + c0, t, dst + o + c0, arg + o + c0);
    }
  }
}

// The backward pass, vectorised, when windows do not overlap, over output rows
// [r0, r1): every input gradient a window covers is written once, the output
// gradient at the window's arg-max position and zero elsewhere.
void route_rows(const PoolPlan plan, const float* dy, const uint8_t* arg, float* dx, int64_t r0, int64_t r1) {
  const PoolGeometry g = plan.g;
  const int64_t image = g.h * g.w * g.c;
  uint8_t local[256];
  for (int64_t r = r0; r < r1; ++r) {
    float* x = dx + r / g.oh * image;
    const int64_t oy = r % g.oh;
    int64_t ox = 0;
    if (plan.wide.route && g.y1(oy) - g.y0(oy) == g.k) {
      const int64_t o = r * g.ow * g.c;
      plan.wide.route(dy + o, arg + o, g.c, g.ow - 1, x + plan.corner(oy, 0), g.w * g.c);
      ox = g.ow - 1;
    }
    for (; ox < g.ow; ++ox) {
      const int64_t o = (r * g.ow + ox) * g.c, corner = plan.corner(oy, ox);
      const Taps t = plan.taps(oy, ox, local);
      over_blocks(plan.width, g.c, [&]<int W, int Chunks>(int64_t c0) {
        route_blocks<W, Chunks>(dy + o, arg + o, t, g.c, c0, x, corner);
      });
    }
  }
}

PoolPlan plan_of(const PoolGeometry& g, const uint8_t* all_positions, const int64_t* offsets) {
  return {g, all_positions, offsets, vector_width(g.c), wide_rows(g)};
}

}  // namespace

MaxPoolKernels::MaxPoolKernels(const PoolGeometry& g)
    : g_(g), all_positions_(static_cast<std::size_t>(g.k * g.k)), row_windows_(static_cast<std::size_t>(g.h)),
      col_windows_(static_cast<std::size_t>(g.w)) {
  std::iota(all_positions_.begin(), all_positions_.end(), uint8_t{0});
  for (int64_t p = 0; p < g.k * g.k; ++p) offsets_.push_back((p / g.k * g.w + p % g.k) * g.c);
  // Windows come in order and those covering a row (or column) are consecutive.
  auto cover = [](WindowSpan& span, int64_t window) {
    if (span.first == span.end) span.first = window;
    span.end = window + 1;
  };
  for (int64_t oy = 0; oy < g.oh; ++oy)
    for (int64_t iy = g.y0(oy); iy < g.y1(oy); ++iy) cover(row_windows_[static_cast<std::size_t>(iy)], oy);
  for (int64_t ox = 0; ox < g.ow; ++ox)
    for (int64_t ix = g.x0(ox); ix < g.x1(ox); ++ix) cover(col_windows_[static_cast<std::size_t>(ix)], ox);
  for (int64_t y = 0; y < g.h; ++y)
    if (row_windows_[static_cast<std::size_t>(y)].empty()) uncovered_rows_.push_back(y);
  for (int64_t x = 0; x < g.w; ++x)
    if (col_windows_[static_cast<std::size_t>(x)].empty()) uncovered_cols_.push_back(x);
}

bool MaxPoolKernels::routes_rows() const { return g_.s >= g_.k && vector_width(g_.c); }

void MaxPoolKernels::max_rows(const float* src, float* dst, uint8_t* positions, int64_t r0, int64_t r1) const {
  cpu::max_rows(plan_of(g_, all_positions_.data(), offsets_.data()), src, dst, positions, r0, r1);
}

void MaxPoolKernels::max_image(const float* src, float* dst, uint8_t* positions) const {
  cpu::max_rows(plan_of(g_, all_positions_.data(), offsets_.data()), src, dst, positions, 0, g_.oh);
}

void MaxPoolKernels::route_image(const float* dy, const uint8_t* positions, float* dx) const {
  const PoolPlan plan = plan_of(g_, all_positions_.data(), offsets_.data());
  if (routes_rows()) {
    route_rows(plan, dy, positions, dx, 0, g_.oh);
    clear_uncovered(dx);
    return;
  }
  if (plan.width) {  // overlapping windows: each input gradient gathered, kChunks blocks of channels at a time
    over_blocks(plan.width, g_.c, [&]<int W, int Chunks>(int64_t c0) {
      gather_blocks<W, Chunks>(g_, row_windows_.data(), col_windows_.data(), dy, positions, c0, dx);
    });
    return;
  }
  // Fewer than 4 channels: clear, then add each output gradient in at its
  // window's maximum, a channel at a time (for C = 3 this was 4× faster than
  // writing every position of every window).
  std::memset(dx, 0, sizeof(float) * image_size());
  for (int64_t oy = 0; oy < g_.oh; ++oy)
    for (int64_t ox = 0; ox < g_.ow; ++ox) {
      const int64_t o = (oy * g_.ow + ox) * g_.c, corner = plan.corner(oy, ox);
      for (int64_t c = 0; c < g_.c; ++c) dx[corner + offsets_[positions[o + c]] + c] += dy[o + c];
    }
}

void MaxPoolKernels::route(const float* dy, const uint8_t* positions, float* dx) const {
  if (routes_rows()) {
    const PoolPlan plan = plan_of(g_, all_positions_.data(), offsets_.data());
    const int64_t rows = g_.n * g_.oh;
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      route_rows(plan, dy, positions, dx, rows * t / nt, rows * (t + 1) / nt);
    }
    for (int64_t n = 0; n < g_.n; ++n) clear_uncovered(dx + n * image_size());
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < g_.n; ++n)
    route_image(dy + n * pooled_size(), positions + n * pooled_size(), dx + n * image_size());
}

// Input gradients no window reaches (disjoint windows that skip pixels), in one image.
void MaxPoolKernels::clear_uncovered(float* dx) const {
  for (int64_t y : uncovered_rows_) std::fill_n(dx + y * g_.w * g_.c, g_.w * g_.c, 0.0f);
  for (int64_t x0 : uncovered_cols_)
    for (int64_t y = 0; y < g_.h; ++y) std::fill_n(dx + (y * g_.w + x0) * g_.c, g_.c, 0.0f);
}

namespace {

class MaxPool2dOp final : public CpuOp {
 public:
  // relu: the buffers of a ReLU fused after the pool (its only reader), or null.
  MaxPool2dOp(const PoolGeometry& g, int64_t outputs, std::shared_ptr<const OpBuffers> relu)
      : pool_(g), positions_(static_cast<std::size_t>(outputs)), relu_(std::move(relu)),
        threads_(omp_get_max_threads()) {
    if (relu_) masked_.resize(static_cast<std::size_t>(threads_ * pool_.pooled_size()));
  }

  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }

  // With a fused ReLU, each thread takes max(0, ·) of the rows it pooled
  // while they are in cache, into the ReLU's output: the pool's own output
  // is never written.
  void forward(DnnlEnv&, bool) override {
    const float* src = b_.src;
    float* dst = relu_ ? relu_->dst : b_.dst;
    uint8_t* positions = positions_.data();
    const bool relu = relu_ != nullptr;
    const int64_t rows = pool_.geometry().n * pool_.geometry().oh, row = pool_.geometry().ow * pool_.geometry().c;
#pragma omp parallel
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
      pool_.max_rows(src, dst, positions, r0, r1);
      if (relu)
        for (int64_t i = r0 * row; i < r1 * row; ++i) dst[i] = relu_forward(dst[i]);
    }
  }

  // With a fused ReLU, each image's pooled gradient is masked by the ReLU's
  // output into a per-thread buffer, then routed. Masking by the output
  // rather than the ReLU's input (the pool's output) gives the same bits: a
  // pooled maximum is never NaN (comparisons with NaN never win), so
  // relu(x) <= 0 exactly when x <= 0.
  void backward(DnnlEnv&) override {
    if (!b_.diff_src) return;
    if (!relu_) return pool_.route(b_.diff_dst, positions_.data(), b_.diff_src);
    const float *y = relu_->dst, *dy = relu_->diff_dst;
    const uint8_t* positions = positions_.data();
    float* dx = b_.diff_src;
    const int64_t pooled = pool_.pooled_size(), image = pool_.image_size();
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t n = 0; n < pool_.geometry().n; ++n) {
      float* m = masked_.data() + static_cast<std::size_t>(omp_get_thread_num() * pooled);
      const float *yn = y + n * pooled, *dyn = dy + n * pooled;
      for (int64_t k = 0; k < pooled; ++k) m[k] = relu_backward(yn[k], dyn[k]);
      pool_.route_image(m, positions + n * pooled, dx + n * image);
    }
  }

 private:
  MaxPoolKernels pool_;
  std::vector<uint8_t> positions_;  // window position of each output's maximum
  std::shared_ptr<const OpBuffers> relu_;
  int threads_;
  std::vector<float> masked_;  // per thread: one image's masked output gradient (fused ReLU)
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_max_pool2d(const nn::LayerPlan& plan, const Shape& in, const Shape& out,
                                       std::shared_ptr<const OpBuffers> relu) {
  const auto& p = std::get<nn::MaxPool2d>(plan.layer);
  // The model refuses larger windows where it is built (nn::output_shape);
  // the winning position is kept in a byte.
  require(p.kernel <= nn::kMaxPoolLargestKernel, plan.name + ": max-pool kernel sizes above 16 are not supported");
  return std::make_unique<MaxPool2dOp>(PoolGeometry(in, out, p.kernel, p.stride, p.padding, plan.name), numel(out),
                                       std::move(relu));
}

}  // namespace convoy::cpu
