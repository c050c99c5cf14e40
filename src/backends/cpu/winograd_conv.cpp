#include "backends/cpu/winograd_conv.h"

#include <cstring>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <stdexcept>
#include <string_view>
#include <utility>

#include "backends/cpu/sgemm.h"
#include "backends/cpu/simd.h"
#include "backends/cpu/winograd_transforms.h"
#include "convoy/core/error.h"

namespace convoy::cpu {
namespace {

// All tiles' V and M above this: blocks of tiles per thread instead.
constexpr int64_t kFusedAboveBytes = int64_t{8} << 20;
// Each thread's sums of the weight gradient's blocks stay below this. 1 MiB
// takes in F(4×4) on 64→64 (36 × 64 × 64 floats, 576 KiB): there all tiles'
// V and Z (ResNet-18's layer1: 9.4 MB each) went out to memory and back;
// blocks cut its weight gradient 3.40 → 2.42 ms (2 threads; 7.2 → 4.7 on one;
// bench/conv_algo_times, AMD EPYC, 2026-12-03, with kSkew). On 128→128 (2.4 MB
// of sums; F(2×2)'s is 1 MiB) blocks were 4% slower on 2 threads and 12%
// faster on one: left out.
constexpr int64_t kOwnSumsBytes = int64_t{1} << 20;

// The floats from one position's matrix (rows × cols) to the next, in every
// workspace (V, M, Z, S, U): 64 bytes more than the matrix. Without the skew
// the P matrices lay a power of two apart (ResNet-18's layer1: 256 KiB, layer3:
// 64 KiB), so a tile's P stores or loads all fell in one set of L1 and of L2
// and evicted each other.
constexpr int64_t kSkew = 16;
constexpr int64_t matrix_stride(int64_t rows, int64_t cols) { return rows * cols + kSkew; }

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
// {p[0], p[stride], ..., p[(lanes - 1) · stride]}, built in registers: set
// lane by lane, GCC 12 wrote the lanes to the stack and read them back as one
// vector, a failed store-to-load forward each time (41% of the kernel
// transform's samples on an AMD EPYC).
template <class T>
T load_strided(const float* p, int64_t stride) {
  if constexpr (sizeof(T) == sizeof(float)) {
    (void)stride;
    return *p;
  } else {
    return [&]<std::size_t... i>(std::index_sequence<i...>) {
      return T{p[static_cast<int64_t>(i) * stride]...};
    }(std::make_index_sequence<kLanes>{});
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

// The tiles [first, first + count) whose transforms a workspace holds: each
// of its matrices (one per position) is [count][channels].
struct Rows {
  int64_t first, count;
};

// Where tile t's m × m outputs start: image n, row y, column x.
template <class K>
void corner(const Grid& g, int64_t t, int64_t& n, int64_t& y, int64_t& x) {
  const int64_t per_image = g.tiles_y * g.tiles_x;
  n = t / per_image;
  y = (t % per_image) / g.tiles_x * K::m;
  x = t % g.tiles_x * K::m;
}

// The slots of the positions: identity, or K's for the input gradient.
template <class K, bool turned>
constexpr std::array<int, K::n * K::n> slots() {
  if constexpr (turned) return K::turned_slots;
  else return winograd::identity_slots<K::n * K::n>();
}

// v[slot[k]][t - rows.first][c] = (Bᵀ d B)[k] for tiles [t0, t1) of `image`
// (NHWC, `channels`), d the n × n patch at (y - 1, x - 1), `zeros` outside.
template <class K, bool turned>
void input_transform(const Grid& g, const float* image, int64_t channels, const float* zeros, int64_t t0, int64_t t1,
                     Rows rows, float* v) {
  constexpr int n = K::n;
  constexpr auto slot = slots<K, turned>();
  const int64_t matrix = matrix_stride(rows.count, channels);
  for (int64_t t = t0; t < t1; ++t) {
    int64_t img, y0, x0;
    corner<K>(g, t, img, y0, x0);
    const float* p[n * n];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t y = y0 - 1 + i, x = x0 - 1 + j;
        p[i * n + j] = y < 0 || y >= g.height || x < 0 || x >= g.width
                           ? zeros
                           : image + ((img * g.height + y) * g.width + x) * channels;
      }
    float* out[n * n];
    for (int k = 0; k < n * n; ++k) out[k] = v + slot[k] * matrix + (t - rows.first) * channels;
    over_channels(channels, [&]<class T>(int64_t c) {
      T r[n][n];  // Bᵀ d: column by column
      for (int j = 0; j < n; ++j) {
        T col[n], y[n];
        for (int i = 0; i < n; ++i) col[i] = load<T>(p[i * n + j] + c);
        K::template input<turned>(col, y);
        for (int i = 0; i < n; ++i) r[i][j] = y[i];
      }
      for (int i = 0; i < n; ++i) {  // (Bᵀ d) B: row by row
        T y[n];
        K::template input<turned>(r[i], y);
        for (int j = 0; j < n; ++j) store<T>(out[i * n + j] + c, y[j]);
      }
    });
  }
}

// Tiles [t0, t1) of `image` (NHWC, `channels`) = Aᵀ m A + bias, m[k] read
// from m[slot[k]][t - rows.first][c]; the outputs past the image's edge are
// dropped.
template <class K, bool turned>
void output_transform(const Grid& g, const float* m, int64_t channels, const float* bias, const float* zeros,
                      int64_t t0, int64_t t1, Rows rows, float* image) {
  constexpr int n = K::n, mo = K::m;
  constexpr auto slot = slots<K, turned>();
  const int64_t matrix = matrix_stride(rows.count, channels);
  if (!bias) bias = zeros;
  for (int64_t t = t0; t < t1; ++t) {
    int64_t img, y, x;
    corner<K>(g, t, img, y, x);
    const int64_t down = std::min<int64_t>(mo, g.height - y), right = std::min<int64_t>(mo, g.width - x);
    float* o = image + ((img * g.height + y) * g.width + x) * channels;
    const int64_t row = g.width * channels;
    const float* in[n * n];
    for (int k = 0; k < n * n; ++k) in[k] = m + slot[k] * matrix + (t - rows.first) * channels;
    over_channels(channels, [&]<class T>(int64_t c) {
      T s[mo][n];  // Aᵀ m: column by column
      for (int j = 0; j < n; ++j) {
        T col[n], z[mo];
        for (int i = 0; i < n; ++i) col[i] = load<T>(in[i * n + j] + c);
        K::template output<turned>(col, z);
        for (int i = 0; i < mo; ++i) s[i][j] = z[i];
      }
      const T b = load<T>(bias + c);
      for (int64_t i = 0; i < down; ++i) {  // (Aᵀ m) A: row by row
        T z[mo];
        K::template output<turned>(s[i], z);
        for (int64_t j = 0; j < right; ++j) store<T>(o + i * row + j * channels + c, b + z[j]);
      }
    });
  }
}

// z[k][t - rows.first][o] = (A e Aᵀ)[k] for the m × m output-gradient tile e
// of tiles [t0, t1) (zeros past the edge): the adjoint of the output transform.
template <class K>
void gradient_transform(const Grid& g, const float* diff, int64_t channels, const float* zeros, int64_t t0,
                        int64_t t1, Rows rows, float* z) {
  constexpr int n = K::n, mo = K::m;
  const int64_t matrix = matrix_stride(rows.count, channels);
  for (int64_t t = t0; t < t1; ++t) {
    int64_t img, y, x;
    corner<K>(g, t, img, y, x);
    const float* e[mo * mo];
    for (int64_t i = 0; i < mo; ++i)
      for (int64_t j = 0; j < mo; ++j)
        e[i * mo + j] = y + i < g.height && x + j < g.width
                            ? diff + ((img * g.height + y + i) * g.width + x + j) * channels
                            : zeros;
    float* out = z + (t - rows.first) * channels;
    over_channels(channels, [&]<class T>(int64_t c) {
      T r[n][mo];  // A e: column by column
      for (int j = 0; j < mo; ++j) {
        T col[mo], w[n];
        for (int i = 0; i < mo; ++i) col[i] = load<T>(e[i * mo + j] + c);
        K::gradient(col, w);
        for (int i = 0; i < n; ++i) r[i][j] = w[i];
      }
      for (int i = 0; i < n; ++i) {  // (A e) Aᵀ: row by row
        T w[n];
        K::gradient(r[i], w);
        for (int j = 0; j < n; ++j) store<T>(out + (i * n + j) * matrix + c, w[j]);
      }
    });
  }
}

// U[k][o][c] = (G g Gᵀ)[k] of filter o: its weights read in order, kLanes
// channels' kernels at a time (as nine gathered vectors), n² streams written
// in order.
template <class K>
void kernel_transform(const float* weight, int64_t channels, int64_t filters, int64_t o, float* u) {
  constexpr int n = K::n;
  const int64_t matrix = matrix_stride(filters, channels);
  const float* w = weight + o * channels * 9;
  float* out = u + o * channels;
  over_channels(channels, [&]<class T>(int64_t c) {
    T g[9];
    for (int j = 0; j < 9; ++j) g[j] = load_strided<T>(w + c * 9 + j, 9);
    T r[n][3];  // G g: column by column
    for (int j = 0; j < 3; ++j) {
      const T col[3] = {g[j], g[3 + j], g[6 + j]};
      T y[n];
      K::kernel(col, y);
      for (int i = 0; i < n; ++i) r[i][j] = y[i];
    }
    for (int i = 0; i < n; ++i) {  // (G g) Gᵀ: row by row
      T y[n];
      K::kernel(r[i], y);
      for (int j = 0; j < n; ++j) store<T>(out + (i * n + j) * matrix + c, y[j]);
    }
  });
}

// dW[o][c] = Gᵀ S[·][o][c] G for the pairs p = o · C + c in [p0, p1), kLanes
// pairs per vector (S's positions `stride` floats apart); their nine results
// each go out through a transposing buffer, in order.
template <class K>
void kernel_gradient_transform(const float* s, int64_t stride, int64_t p0, int64_t p1, float* dw) {
  constexpr int n = K::n;
  over_range(p0, p1, [&]<class V>(int64_t p) {
    V r[3][n];  // Gᵀ S: column by column
    for (int j = 0; j < n; ++j) {
      V col[n], y[3];
      for (int i = 0; i < n; ++i) col[i] = load<V>(s + (i * n + j) * stride + p);
      K::kernel_gradient(col, y);
      for (int i = 0; i < 3; ++i) r[i][j] = y[i];
    }
    V k[9];
    for (int i = 0; i < 3; ++i) {  // (Gᵀ S) G: row by row
      V y[3];
      K::kernel_gradient(r[i], y);
      for (int j = 0; j < 3; ++j) k[i * 3 + j] = y[j];
    }
    store_strided<V>(k, dw + p * 9);  // p = o · C + c, as in [O, C, 3, 3]
  });
}

// One tile size's transforms, as plain functions: the passes below are
// written once for both.
struct Transforms {
  int m, positions;
  void (*input)(const Grid&, const float*, int64_t, const float*, int64_t, int64_t, Rows, float*);
  void (*input_turned)(const Grid&, const float*, int64_t, const float*, int64_t, int64_t, Rows, float*);
  void (*output)(const Grid&, const float*, int64_t, const float*, const float*, int64_t, int64_t, Rows, float*);
  void (*output_turned)(const Grid&, const float*, int64_t, const float*, const float*, int64_t, int64_t, Rows,
                        float*);
  void (*gradient)(const Grid&, const float*, int64_t, const float*, int64_t, int64_t, Rows, float*);
  void (*kernel)(const float*, int64_t, int64_t, int64_t, float*);
  void (*kernel_gradient)(const float*, int64_t, int64_t, int64_t, float*);
};

template <class K>
constexpr Transforms transforms_of() {
  return {K::m,
          K::n * K::n,
          &input_transform<K, false>,
          &input_transform<K, true>,
          &output_transform<K, false>,
          &output_transform<K, true>,
          &gradient_transform<K>,
          &kernel_transform<K>,
          &kernel_gradient_transform<K>};
}
constexpr Transforms kF2 = transforms_of<winograd::F2>(), kF4 = transforms_of<winograd::F4>();
const Transforms& transforms(int tile) { return tile == 4 ? kF4 : kF2; }
}  // namespace

WinogradConv::WinogradConv(const ConvGeometry& g, WinogradPasses passes)
    : g_(g),
      passes_(passes),
      tile_(passes.tile),
      positions_((tile_ + 2) * (tile_ + 2)),
      tiles_y_((g.out_height + tile_ - 1) / tile_),
      tiles_x_((g.out_width + tile_ - 1) / tile_),
      tiles_(g.batch * tiles_y_ * tiles_x_),
      threads_(omp_get_max_threads()) {
  if (!suits(g) || (tile_ != 2 && tile_ != 4))
    throw std::logic_error("WinogradConv built for a convolution it does not suit");
  if (passes_.forward || passes_.input_gradient)
    u_ = AlignedBuffer(static_cast<std::size_t>(positions_ * matrix_stride(g.filters, g.channels)));
  zeros_ = AlignedBuffer(static_cast<std::size_t>(std::max(g.channels, g.filters)));
  // Blocks of tiles when all tiles' V and M pass 8 MiB (and each thread has
  // several blocks): ~512 KiB of V and M per block, at least 64 tiles so each
  // GEMM amortises packing U[k]. Measured as fast as all tiles at once on
  // one thread here (64→64 at 16×16 and at 56×56, F(2×2)), it keeps the
  // workspace small: a 224×224 ResNet's first stage would otherwise need ~400 MB.
  const int64_t all_bytes = positions_ * tiles_ * (g.channels + g.filters) * int64_t{sizeof(float)};
  const int64_t block = std::max<int64_t>(64, (512 << 10) / (positions_ * (g.channels + g.filters) * 4));
  if (all_bytes > kFusedAboveBytes && tiles_ >= 2 * block * threads_) {
    block_ = block;
    // The weight gradient too when each thread's own sums S_t stay small.
    if (positions_ * g.channels * g.filters * int64_t{sizeof(float)} < kOwnSumsBytes) grad_block_ = block;
  }
}

std::size_t WinogradConv::scratchpad_bytes() const {
  const int64_t c = g_.channels, o = g_.filters, p = positions_, t = tiles_;
  auto ms = matrix_stride;
  int64_t floats = 0;
  if (passes_.forward || passes_.input_gradient)  // V and M, for all tiles or each thread's block
    floats = block_ > 0 ? threads_ * p * (ms(block_, c) + ms(block_, o)) : p * (ms(t, c) + ms(t, o));
  if (passes_.weight_gradient)  // V, Z and S (per thread, or for all tiles), bias sums
    floats = std::max(floats, grad_block_ > 0
                                  ? threads_ * (p * (ms(grad_block_, c) + ms(grad_block_, o) + ms(o, c)) + o)
                                  : p * (ms(t, c) + ms(t, o) + ms(o, c)) + threads_ * o);
  return static_cast<std::size_t>(floats) * sizeof(float);
}

void WinogradConv::prepare(const float* weight) {
  if (!passes_.forward && !passes_.input_gradient) return;
  const Transforms& tf = transforms(tile_);
  float* u = u_.data();
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t o = 0; o < g_.filters; ++o) tf.kernel(weight, g_.channels, g_.filters, o, u);
}

void WinogradConv::forward(const float* src, const float* /*weight: U from prepare()*/, const float* bias,
                           float* dst) {
  // M[k] = V[k] · U[k]ᵀ
  convolve(src, g_.channels, g_.filters, false, bias, dst);
}

void WinogradConv::input_gradient(const float* diff_dst, const float* /*weight: U*/, float* diff_src) {
  // A forward pass of dY through the turned kernel (winograd_transforms.h):
  // its transformed kernels are U's, transposed, at the turned slots; dY's
  // transform is stored in those slots and the product read back from them,
  // so each GEMM pairs slot s of both.
  convolve(diff_dst, g_.filters, g_.channels, true, nullptr, diff_src);
}

void WinogradConv::convolve(const float* in, int64_t in_channels, int64_t out_channels, bool turned,
                            const float* bias, float* out) {
  const int64_t T = tiles_, C = g_.channels, O = g_.filters, P = positions_;
  const Grid grid{g_.height, g_.width, tiles_y_, tiles_x_, T};
  const Transforms& tf = transforms(tile_);
  const auto input = turned ? tf.input_turned : tf.input;
  const auto output = turned ? tf.output_turned : tf.output;
  const char u_op = turned ? 'N' : 'T';
  const float* u = u_.data();
  const float* zeros = zeros_.data();
  auto products = [&](const float* v, Rows rows, float* m, int64_t k) {
    sgemm('N', u_op, rows.count, out_channels, in_channels, v + k * matrix_stride(rows.count, in_channels),
          in_channels, u + k * matrix_stride(O, C), C, m + k * matrix_stride(rows.count, out_channels),
          out_channels);
  };
  if (block_ > 0) {
    // Each thread its fixed range of tiles, in blocks whose V and M stay in
    // its L2: transform, the GEMMs, inverse transform.
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      float* v = scratch_ + t * P * (matrix_stride(block_, in_channels) + matrix_stride(block_, out_channels));
      float* m = v + P * matrix_stride(block_, in_channels);
      const int64_t end = share(T, t + 1, nt);
      for (int64_t first = share(T, t, nt); first < end; first += block_) {
        const Rows rows{first, std::min(block_, end - first)};
        input(grid, in, in_channels, zeros, first, first + rows.count, rows, v);
        for (int64_t k = 0; k < P; ++k) products(v, rows, m, k);
        output(grid, m, out_channels, bias, zeros, first, first + rows.count, rows, out);
      }
    }
    return;
  }
  // All tiles at once, each thread a share of the tiles, then of the GEMMs.
  const Rows all{0, T};
  float* v = scratch_;
  float* m = v + P * matrix_stride(T, in_channels);
#pragma omp parallel num_threads(threads_)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    input(grid, in, in_channels, zeros, share(T, t, nt), share(T, t + 1, nt), all, v);
#pragma omp barrier
    for (int64_t k = share(P, t, nt); k < share(P, t + 1, nt); ++k) products(v, all, m, k);
#pragma omp barrier
    output(grid, m, out_channels, bias, zeros, share(T, t, nt), share(T, t + 1, nt), all, out);
  }
}

void WinogradConv::weight_gradient(const float* src, const float* diff_dst, float* dw, float* db) {
  const int64_t C = g_.channels, O = g_.filters, T = tiles_, P = positions_, pairs = O * C;
  const int64_t sums = matrix_stride(O, C);  // from one position's S[k] to the next
  const Grid grid{g_.height, g_.width, tiles_y_, tiles_x_, T};
  const Transforms& tf = transforms(tile_);
  const float* zeros = zeros_.data();
  // Blocks: each thread's V, Z and own sums S_t; else all tiles' V and Z, and S.
  const int64_t v_floats = P * matrix_stride(grad_block_ > 0 ? grad_block_ : T, C);
  const int64_t z_floats = P * matrix_stride(grad_block_ > 0 ? grad_block_ : T, O);
  const int64_t per_thread = v_floats + z_floats + P * sums;
  float* s = scratch_ + v_floats + z_floats;
  float* bias_sums = grad_block_ > 0 ? scratch_ + threads_ * per_thread : s + P * sums;
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
      float* z = v + v_floats;
      float* own = z + z_floats;
      if (t0 == t1) std::fill_n(own, P * sums, 0.0f);
      for (int64_t first = t0; first < t1; first += grad_block_) {
        const Rows rows{first, std::min(grad_block_, t1 - first)};
        tf.input(grid, src, C, zeros, first, first + rows.count, rows, v);
        tf.gradient(grid, diff_dst, O, zeros, first, first + rows.count, rows, z);
        for (int64_t k = 0; k < P; ++k)
          sgemm('T', 'N', O, C, rows.count, z + k * matrix_stride(rows.count, O), O,
                v + k * matrix_stride(rows.count, C), C, own + k * sums, C,
                first == t0 ? 0.0f : 1.0f);
      }
    } else {
      tf.input(grid, src, C, zeros, t0, t1, {0, T}, scratch_);
      tf.gradient(grid, diff_dst, O, zeros, t0, t1, {0, T}, scratch_ + v_floats);
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
      // This thread's share of the P · O · C sums, position by position.
      const int64_t n = P * pairs, i0 = share(n, t, nt), i1 = share(n, t + 1, nt);
      for (int u = 1; u < nt; ++u) {
        const float* other = s + u * per_thread;
        for (int64_t k = i0 / pairs; k < P && k * pairs < i1; ++k) {
          const int64_t j0 = std::max(i0, k * pairs) - k * pairs, j1 = std::min(i1, (k + 1) * pairs) - k * pairs;
          for (int64_t j = j0; j < j1; ++j) s[k * sums + j] += other[k * sums + j];
        }
      }
    } else {
      // S[k][o][c] = Σ_t Z[k][t][o] · V[k][t][c]
      const float* v = scratch_;
      const float* z = scratch_ + v_floats;
      for (int64_t k = share(P, t, nt); k < share(P, t + 1, nt); ++k)
        sgemm('T', 'N', O, C, T, z + k * matrix_stride(T, O), O, v + k * matrix_stride(T, C), C, s + k * sums, C);
    }
#pragma omp barrier
    tf.kernel_gradient(s, sums, share(pairs, t, nt), share(pairs, t + 1, nt), dw);
  }
  if (db) {
    std::fill_n(db, O, 0.0f);
    for (int t = 0; t < used; ++t)
      for (int64_t o = 0; o < O; ++o) db[o] += bias_sums[t * O + o];
  }
}

}  // namespace convoy::cpu
