#include "backends/cpu/winograd_conv.h"

#include <cstring>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

#include "backends/cpu/sgemm.h"
#include "backends/cpu/simd.h"
#include "convoy/core/error.h"

namespace convoy::cpu {
namespace {

// The F(2×2, 3×3) matrices, written out in the transforms below:
//   Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   (4×4 input patch d)
//   G  = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]              (3×3 kernel g)
//   Aᵀ = [1 1 1 0; 0 1 -1 -1]                       (4×4 product m → 2×2)
constexpr int64_t kPositions = 16;  // of a transformed 4×4 tile
// All tiles' V and M above this: blocks of tiles per thread instead.
constexpr int64_t kFusedAboveBytes = int64_t{8} << 20;
// The most each thread's sums of the weight gradient's blocks may take.
constexpr int64_t kOwnSumsBytes = int64_t{256} << 10;

// simd::kLanes channels at once (16 in the AVX-512 copy, 8 in the AVX2 one,
// 4 in the baseline), the remainder one at a time; the transforms are
// written once for both, over T = simd::Vec or float.
using simd::kLanes;
using simd::Vec;
using simd::load;
using simd::store;
template <class Fn>
void over_range(int64_t begin, int64_t end, Fn&& fn) {
  int64_t c = begin;
  for (; c + kLanes <= end; c += kLanes) fn.template operator()<Vec>(c);
  for (; c < end; ++c) fn.template operator()<float>(c);
}
template <class Fn>
void over_channels(int64_t channels, Fn&& fn) {
  over_range(0, channels, fn);
}
// {p[0], p[stride], ..., p[(lanes - 1) · stride]}: the compiler makes a
// gather of it where the set has one.
template <class T>
T load_strided(const float* p, int64_t stride) {
  if constexpr (sizeof(T) == sizeof(float)) {
    (void)stride;
    return *p;
  } else {
    T v;
    for (int i = 0; i < kLanes; ++i) v[i] = p[i * stride];
    return v;
  }
}
// out[i · 9 + j] = k[j][i]: nine vectors of kLanes 3×3 kernels, written as
// the kernels one after the other.
template <class T>
void store_strided(const T* k, float* out) {
  if constexpr (sizeof(T) == sizeof(float)) {
    for (int j = 0; j < 9; ++j) out[j] = k[j];
  } else {
    alignas(64) float buffer[9][kLanes];
    for (int j = 0; j < 9; ++j) store<T>(buffer[j], k[j]);
    for (int i = 0; i < kLanes; ++i)
      for (int j = 0; j < 9; ++j) out[i * 9 + j] = buffer[j][i];
  }
}

// The tiles of a batch of images of height × width (the output's size, the
// same as the input's): tile t = (n · tiles_y + ty) · tiles_x + tx.
struct Grid {
  int64_t height, width, tiles_y, tiles_x, tiles;
};

// The 4×4 patch of tile t: pointers to its pixels' channel vectors in an
// NHWC image of `channels` (`zeros` outside the image).
void patch(const Grid& g, const float* image, int64_t channels, const float* zeros, int64_t t, const float* p[16]) {
  const int64_t per_image = g.tiles_y * g.tiles_x, n = t / per_image;
  const int64_t y0 = (t % per_image) / g.tiles_x * 2 - 1, x0 = t % g.tiles_x * 2 - 1;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      const int64_t y = y0 + i, x = x0 + j;
      p[i * 4 + j] = y < 0 || y >= g.height || x < 0 || x >= g.width
                         ? zeros
                         : image + ((n * g.height + y) * g.width + x) * channels;
    }
}

// The tiles [first, first + count) whose transforms a workspace holds: each
// of its 16 matrices is [count][channels].
struct Rows {
  int64_t first, count;
};

// v[slot[k]][t - rows.first][c] = (Bᵀ d B)[k] for tiles [t0, t1) of `image`.
void input_transform(const Grid& g, const float* image, int64_t channels, const float* zeros, const int* slot,
                     int64_t t0, int64_t t1, Rows rows, float* v) {
  const int64_t matrix = rows.count * channels;
  for (int64_t t = t0; t < t1; ++t) {
    const float* p[16];
    patch(g, image, channels, zeros, t, p);
    float* out[16];
    for (int k = 0; k < 16; ++k) out[k] = v + slot[k] * matrix + (t - rows.first) * channels;
    over_channels(channels, [&]<class T>(int64_t c) {
      T r[4][4];  // Bᵀ d: rows
      for (int j = 0; j < 4; ++j) {
        const T d0 = load<T>(p[j] + c), d1 = load<T>(p[4 + j] + c), d2 = load<T>(p[8 + j] + c),
                d3 = load<T>(p[12 + j] + c);
        r[0][j] = d0 - d2;
        r[1][j] = d1 + d2;
        r[2][j] = d2 - d1;
        r[3][j] = d1 - d3;
      }
      for (int i = 0; i < 4; ++i) {  // (Bᵀ d) B: columns
        store<T>(out[i * 4 + 0] + c, r[i][0] - r[i][2]);
        store<T>(out[i * 4 + 1] + c, r[i][1] + r[i][2]);
        store<T>(out[i * 4 + 2] + c, r[i][2] - r[i][1]);
        store<T>(out[i * 4 + 3] + c, r[i][1] - r[i][3]);
      }
    });
  }
}

// Tiles [t0, t1) of `image` (NHWC, `channels`) = Aᵀ m A + bias, m[k] read
// from m[slot[k]][t - rows.first][c]; the 2×2 outputs past the image's edge
// are dropped.
void output_transform(const Grid& g, const float* m, int64_t channels, const int* slot, const float* bias,
                      const float* zeros, int64_t t0, int64_t t1, Rows rows, float* image) {
  const int64_t matrix = rows.count * channels, per_image = g.tiles_y * g.tiles_x;
  if (!bias) bias = zeros;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t n = t / per_image, y = (t % per_image) / g.tiles_x * 2, x = t % g.tiles_x * 2;
    const bool down = y + 1 < g.height, right = x + 1 < g.width;
    float* o = image + ((n * g.height + y) * g.width + x) * channels;
    const int64_t row = g.width * channels;
    const float* in[16];
    for (int k = 0; k < 16; ++k) in[k] = m + slot[k] * matrix + (t - rows.first) * channels;
    over_channels(channels, [&]<class T>(int64_t c) {
      T s[2][4];  // Aᵀ m: rows
      for (int j = 0; j < 4; ++j) {
        const T m0 = load<T>(in[j] + c), m1 = load<T>(in[4 + j] + c), m2 = load<T>(in[8 + j] + c),
                m3 = load<T>(in[12 + j] + c);
        s[0][j] = m0 + m1 + m2;
        s[1][j] = m1 - m2 - m3;
      }
      const T b = load<T>(bias + c);
      store<T>(o + c, b + (s[0][0] + s[0][1] + s[0][2]));
      if (right) store<T>(o + channels + c, b + (s[0][1] - s[0][2] - s[0][3]));
      if (down) {
        store<T>(o + row + c, b + (s[1][0] + s[1][1] + s[1][2]));
        if (right) store<T>(o + row + channels + c, b + (s[1][1] - s[1][2] - s[1][3]));
      }
    });
  }
}

// z[k][t - rows.first][o] = (A e Aᵀ)[k] for the 2×2 output-gradient tile e of
// tiles [t0, t1) (zeros past the edge): the adjoint of the output transform.
void gradient_transform(const Grid& g, const float* diff, int64_t channels, const float* zeros, int64_t t0,
                        int64_t t1, Rows rows, float* z) {
  const int64_t matrix = rows.count * channels, per_image = g.tiles_y * g.tiles_x;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t n = t / per_image, y = (t % per_image) / g.tiles_x * 2, x = t % g.tiles_x * 2;
    const bool down = y + 1 < g.height, right = x + 1 < g.width;
    const float* e0 = diff + ((n * g.height + y) * g.width + x) * channels;
    const float* e1 = right ? e0 + channels : zeros;
    const float* e2 = down ? e0 + g.width * channels : zeros;
    const float* e3 = down && right ? e0 + (g.width + 1) * channels : zeros;
    float* out = z + (t - rows.first) * channels;
    over_channels(channels, [&]<class T>(int64_t c) {
      const T a = load<T>(e0 + c), b = load<T>(e1 + c), d = load<T>(e2 + c), f = load<T>(e3 + c);
      // A e: rows [e0; e0 + e1; e0 - e1; -e1] of the 2×2 [a b; d f], then columns.
      const T r[4][2] = {{a, b}, {a + d, b + f}, {a - d, b - f}, {-d, -f}};
      for (int i = 0; i < 4; ++i) {
        store<T>(out + (i * 4 + 0) * matrix + c, r[i][0]);
        store<T>(out + (i * 4 + 1) * matrix + c, r[i][0] + r[i][1]);
        store<T>(out + (i * 4 + 2) * matrix + c, r[i][0] - r[i][1]);
        store<T>(out + (i * 4 + 3) * matrix + c, -r[i][1]);
      }
    });
  }
}

// The slots of the 16 positions: identity, and 0 ↔ 3 swapped in rows and
// columns (the 180° turn of the kernel, see the header).
constexpr int kSame[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
constexpr int kTurned[16] = {15, 13, 14, 12, 7, 5, 6, 4, 11, 9, 10, 8, 3, 1, 2, 0};

}  // namespace

bool WinogradConv::suits(const ConvGeometry& g) {
  return g.kernel == 3 && g.stride == 1 && g.groups == 1 && g.pad_top == 1 && g.pad_left == 1 &&
         g.out_height == g.height && g.out_width == g.width;
}

WinogradPasses WinogradConv::passes(const ConvGeometry& g, ConvAlgo algo) {
  if (algo == ConvAlgo::direct || !suits(g)) return {};
  if (algo == ConvAlgo::winograd) return {true, true, true};
  // auto: where it won every pass on one AVX2 core (bench/conv_algo_times,
  // docs/architecture.md): 32→64 and wider. At 32→32 it tied, below it lost
  // (each tile's transforms cost as much as its few multiply-adds).
  const bool wide = g.channels >= 32 && g.filters >= 32 && g.channels * g.filters >= 32 * 64;
  return {wide, wide, wide};
}

WinogradConv::WinogradConv(const ConvGeometry& g, WinogradPasses passes)
    : g_(g),
      passes_(passes),
      tiles_y_((g.out_height + 1) / 2),
      tiles_x_((g.out_width + 1) / 2),
      tiles_(g.batch * tiles_y_ * tiles_x_),
      threads_(omp_get_max_threads()) {
  if (!suits(g)) throw std::logic_error("WinogradConv built for a convolution it does not suit");
  if (passes_.forward || passes_.input_gradient)
    u_ = AlignedBuffer(static_cast<std::size_t>(kPositions * g.channels * g.filters));
  zeros_ = AlignedBuffer(static_cast<std::size_t>(std::max(g.channels, g.filters)));
  // Blocks of tiles when all tiles' V and M pass 8 MiB (and each thread has
  // several blocks): ~512 KiB of V and M per block, at least 64 tiles so each
  // GEMM amortises packing U[k]. Measured as fast as all tiles at once on
  // one thread here (64→64 at 16×16 and at 56×56), it keeps the workspace
  // small: a 224×224 ResNet's first stage would otherwise need ~400 MB.
  const int64_t all_bytes = kPositions * tiles_ * (g.channels + g.filters) * int64_t{sizeof(float)};
  const int64_t block = std::max<int64_t>(64, (512 << 10) / (kPositions * (g.channels + g.filters) * 4));
  if (all_bytes > kFusedAboveBytes && tiles_ >= 2 * block * threads_) {
    block_ = block;
    // The weight gradient too when each thread's own sums S_t stay small.
    if (kPositions * g.channels * g.filters * int64_t{sizeof(float)} <= kOwnSumsBytes) grad_block_ = block;
  }
}

std::size_t WinogradConv::scratchpad_bytes() const {
  const int64_t c = g_.channels, o = g_.filters, per_tile = kPositions * tiles_;
  int64_t floats = 0;
  if (passes_.forward || passes_.input_gradient)  // V and M, for all tiles or each thread's block
    floats = block_ > 0 ? threads_ * kPositions * block_ * (c + o) : per_tile * (c + o);
  if (passes_.weight_gradient)  // V, Z and S (per thread, or for all tiles), bias sums
    floats = std::max(floats, grad_block_ > 0 ? threads_ * (kPositions * (grad_block_ * (c + o) + c * o) + o)
                                              : per_tile * (c + o) + kPositions * c * o + threads_ * o);
  return static_cast<std::size_t>(floats) * sizeof(float);
}

void WinogradConv::prepare(const float* weight) {
  if (!passes_.forward && !passes_.input_gradient) return;
  const int64_t C = g_.channels, O = g_.filters, matrix = O * C;
  float* u = u_.data();
  // U[k][o][c] = (G g Gᵀ)[k]: each filter's weights read in order, eight
  // channels' kernels at a time (72 floats, as nine gathered vectors), 16
  // streams written in order.
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t o = 0; o < O; ++o) {
    const float* w = weight + o * C * 9;
    float* out = u + o * C;
    over_channels(C, [&]<class T>(int64_t c) {
      T g[9];
      for (int j = 0; j < 9; ++j) g[j] = load_strided<T>(w + c * 9 + j, 9);
      T r[4][3];  // G g: rows
      for (int j = 0; j < 3; ++j) {
        r[0][j] = g[j];
        r[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
        r[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
        r[3][j] = g[6 + j];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) Gᵀ: columns
        store<T>(out + (i * 4 + 0) * matrix + c, r[i][0]);
        store<T>(out + (i * 4 + 1) * matrix + c, 0.5f * (r[i][0] + r[i][1] + r[i][2]));
        store<T>(out + (i * 4 + 2) * matrix + c, 0.5f * (r[i][0] - r[i][1] + r[i][2]));
        store<T>(out + (i * 4 + 3) * matrix + c, r[i][2]);
      }
    });
  }
}

void WinogradConv::forward(const float* src, const float* /*weight: U from prepare()*/, const float* bias,
                           float* dst) {
  // M[k] = V[k] · U[k]ᵀ
  convolve(src, g_.channels, g_.filters, kSame, 'T', bias, dst);
}

void WinogradConv::input_gradient(const float* diff_dst, const float* /*weight: U*/, float* diff_src) {
  // A forward pass of dY through the turned kernel: its position k is U's
  // kTurned[k], transposed. dY's transform is stored in slot kTurned[k] and
  // the product read back from there, so each GEMM pairs slot s of both.
  convolve(diff_dst, g_.filters, g_.channels, kTurned, 'N', nullptr, diff_src);
}

void WinogradConv::convolve(const float* in, int64_t in_channels, int64_t out_channels, const int* slot,
                            char u_op, const float* bias, float* out) {
  const int64_t T = tiles_, C = g_.channels, O = g_.filters;
  const Grid grid{g_.height, g_.width, tiles_y_, tiles_x_, T};
  const float* u = u_.data();
  const float* zeros = zeros_.data();
  auto products = [&](const float* v, Rows rows, float* m, int k) {
    sgemm('N', u_op, rows.count, out_channels, in_channels, v + k * rows.count * in_channels, in_channels,
          u + k * O * C, C, m + k * rows.count * out_channels, out_channels);
  };
  if (block_ > 0) {
    // Each thread its fixed range of tiles, in blocks whose V and M stay in
    // its L2: transform, 16 GEMMs, inverse transform.
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      float* v = scratch_ + t * kPositions * block_ * (in_channels + out_channels);
      float* m = v + kPositions * block_ * in_channels;
      const int64_t end = share(T, t + 1, nt);
      for (int64_t first = share(T, t, nt); first < end; first += block_) {
        const Rows rows{first, std::min(block_, end - first)};
        input_transform(grid, in, in_channels, zeros, slot, first, first + rows.count, rows, v);
        for (int k = 0; k < kPositions; ++k) products(v, rows, m, k);
        output_transform(grid, m, out_channels, slot, bias, zeros, first, first + rows.count, rows, out);
      }
    }
    return;
  }
  // All tiles at once, each thread a share of the tiles, then of the 16 GEMMs.
  const Rows all{0, T};
  float* v = scratch_;
  float* m = v + kPositions * T * in_channels;
#pragma omp parallel num_threads(threads_)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    input_transform(grid, in, in_channels, zeros, slot, share(T, t, nt), share(T, t + 1, nt), all, v);
#pragma omp barrier
    for (int k = static_cast<int>(share(kPositions, t, nt)); k < share(kPositions, t + 1, nt); ++k)
      products(v, all, m, k);
#pragma omp barrier
    output_transform(grid, m, out_channels, slot, bias, zeros, share(T, t, nt), share(T, t + 1, nt), all, out);
  }
}

void WinogradConv::weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) {
  const int64_t C = g_.channels, O = g_.filters, T = tiles_, pairs = O * C;
  const Grid grid{g_.height, g_.width, tiles_y_, tiles_x_, T};
  const float* zeros = zeros_.data();
  // Blocks: each thread's V, Z and own sums S_t; else all tiles' V and Z, and S.
  const int64_t per_thread = kPositions * (grad_block_ * (C + O) + pairs);
  float* s = grad_block_ > 0 ? scratch_ + kPositions * grad_block_ * (C + O) : scratch_ + kPositions * T * (C + O);
  float* bias_sums = grad_block_ > 0 ? scratch_ + threads_ * per_thread : s + kPositions * pairs;
  int used = 1;
#pragma omp parallel num_threads(threads_)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    if (t == 0) used = nt;
    const int64_t t0 = share(T, t, nt), t1 = share(T, t + 1, nt);
    if (grad_block_ > 0) {
      // S_t[k][o][c] = Σ over this thread's tiles, block by block, then
      // S = S_0 + S_1 + ... in thread order.
      float* v = scratch_ + t * per_thread;
      float* z = v + kPositions * grad_block_ * C;
      float* own = z + kPositions * grad_block_ * O;
      if (t0 == t1) std::fill_n(own, kPositions * pairs, 0.0f);
      for (int64_t first = t0; first < t1; first += grad_block_) {
        const Rows rows{first, std::min(grad_block_, t1 - first)};
        input_transform(grid, src, C, zeros, kSame, first, first + rows.count, rows, v);
        gradient_transform(grid, diff_dst, O, zeros, first, first + rows.count, rows, z);
        for (int k = 0; k < kPositions; ++k)
          sgemm('T', 'N', O, C, rows.count, z + k * rows.count * O, O, v + k * rows.count * C, C, own + k * pairs, C,
                first == t0 ? 0.0f : 1.0f);
      }
    } else {
      input_transform(grid, src, C, zeros, kSame, t0, t1, {0, T}, scratch_);
      gradient_transform(grid, diff_dst, O, zeros, t0, t1, {0, T}, scratch_ + kPositions * T * C);
    }
    if (db) {  // this thread's rows of dY, summed in order
      float* sum = bias_sums + t * O;
      std::fill_n(sum, O, 0.0f);
      const int64_t rows = g_.batch * g_.height * g_.width;
      for (int64_t r = share(rows, t, nt); r < share(rows, t + 1, nt); ++r)
        for (int64_t o = 0; o < O; ++o) sum[o] += diff_dst[r * O + o];
    }
#pragma omp barrier
    if (grad_block_ > 0) {
      const int64_t n = kPositions * pairs;
      for (int u = 1; u < nt; ++u) {
        const float* other = s + u * per_thread;
        for (int64_t i = share(n, t, nt); i < share(n, t + 1, nt); ++i) s[i] += other[i];
      }
    } else {
      // S[k][o][c] = Σ_t Z[k][t][o] · V[k][t][c]
      const float* v = scratch_;
      const float* z = scratch_ + kPositions * T * C;
      for (int k = static_cast<int>(share(kPositions, t, nt)); k < share(kPositions, t + 1, nt); ++k)
        sgemm('T', 'N', O, C, T, z + k * T * O, O, v + k * T * C, C, s + k * pairs, C);
    }
#pragma omp barrier
    // dW[o][c] = Gᵀ S[·][o][c] G, eight (o, c) pairs per vector; their 72
    // results go out through a transposing buffer, in order.
    over_range(share(pairs, t, nt), share(pairs, t + 1, nt), [&]<class V>(int64_t p) {
      V r[3][4];  // Gᵀ S: rows
      for (int j = 0; j < 4; ++j) {
        const V q0 = load<V>(s + j * pairs + p), q1 = load<V>(s + (4 + j) * pairs + p),
                q2 = load<V>(s + (8 + j) * pairs + p), q3 = load<V>(s + (12 + j) * pairs + p);
        r[0][j] = q0 + 0.5f * (q1 + q2);
        r[1][j] = 0.5f * (q1 - q2);
        r[2][j] = 0.5f * (q1 + q2) + q3;
      }
      V k[9];
      for (int i = 0; i < 3; ++i) {  // (Gᵀ S) G: columns
        k[i * 3 + 0] = r[i][0] + 0.5f * (r[i][1] + r[i][2]);
        k[i * 3 + 1] = 0.5f * (r[i][1] - r[i][2]);
        k[i * 3 + 2] = 0.5f * (r[i][1] + r[i][2]) + r[i][3];
      }
      store_strided<V>(k, dw + p * 9);  // p = o · C + c, as in [O, C, 3, 3]
    });
  }
  if (db) {
    std::fill_n(db, O, 0.0f);
    for (int t = 0; t < used; ++t)
      for (int64_t o = 0; o < O; ++o) db[o] += bias_sums[t * O + o];
  }
}

}  // namespace convoy::cpu
