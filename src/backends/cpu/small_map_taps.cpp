#include "backends/cpu/small_map_taps.h"

#include <algorithm>

#include "backends/cpu/simd.h"

namespace convoy::cpu::taps2x2 {
namespace {

using simd::Vec;
constexpr int L = simd::kLanes;

// The 2×2 output map of a 3×3 pad-1 convolution from a side × side input
// map (side 2: stride 1; side 4: stride 2).
template <int kSide>
struct Map {
  static constexpr int kInputs = kSide * kSide;
  static constexpr int kStride = kSide / 2;
  // The tap joining output pixel p = py · 2 + px to input pixel q = qy ·
  // side + qx, or −1 where none does.
  static constexpr int tap(int p, int q) {
    const int ky = q / kSide - kStride * (p >> 1) + 1, kx = q % kSide - kStride * (p & 1) + 1;
    return ky >= 0 && ky < 3 && kx >= 0 && kx < 3 ? ky * 3 + kx : -1;
  }
};

// The tap joining output pixel p to input pixel q of a 2×2 map (stride 1).
constexpr int tap(int p, int q) { return Map<2>::tap(p, q); }

// Vectors of images per block of sums: 4 · NV sums, NV operands and a
// broadcast in registers (32 on AVX-512: 4 vectors, 64 images; 16: 2).
constexpr int kMaxVectors = simd::kRegisters >= 32 ? 4 : 2;
// k (channels or filters) per block of sums: the forward's 4 · kBlock packed
// rows of 64 images (32 KiB) stay in the 48 KiB L1 across the filters.
constexpr int64_t kBlock = 32;
// The input gradient's k are filters, each one's weights 36·C bytes apart (a
// multiple of 2 KiB for C = 512: two L1 sets per channel), so fewer per block.
constexpr int64_t kInputGradientBlock = 16;

// sums[s][v] (+)= Σ_{k < count} Σ_t W(k, s, t) · in[t][k][v], W(k) = w + k · wstep,
// prefetching the weights `ahead` floats past each k's (the next row's).
template <int NV, bool kInputGradient>
void block(const float* w, int64_t wstep, int64_t ahead, const float* in, int64_t tstride, int64_t np,
           int64_t count, bool first, float* sums) {
  Vec a[4][NV];
  for (int s = 0; s < 4; ++s)
    for (int v = 0; v < NV; ++v) a[s][v] = first ? Vec{} : simd::load<Vec>(sums + s * np + v * L);
  for (int64_t k = 0; k < count; ++k, w += wstep, in += np) {
    __builtin_prefetch(w + ahead);
    // Unrolled, so that every tap index is a constant (GCC left the input
    // gradient's pixel loop rolled, computing them at run time: ~20% slower).
#pragma GCC unroll 4
    for (int t = 0; t < 4; ++t) {
      Vec x[NV];
      for (int v = 0; v < NV; ++v) x[v] = simd::pinned(simd::load<Vec>(in + t * tstride + v * L));
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        // Forward: s = p, t = q; input gradient: s = q, t = p.
        const Vec b = simd::pinned(simd::broadcast<Vec>(w[kInputGradient ? tap(t, s) : tap(s, t)]));
        for (int v = 0; v < NV; ++v) a[s][v] = simd::fma(b, x[v], a[s][v]);
      }
    }
  }
  for (int s = 0; s < 4; ++s)
    for (int v = 0; v < NV; ++v) simd::store(sums + s * np + v * L, a[s][v]);
}

template <bool kInputGradient>
void block_any(int nv, const float* w, int64_t wstep, int64_t ahead, const float* in, int64_t tstride, int64_t np,
               int64_t count, bool first, float* sums) {
  switch (nv) {
    case 1: return block<1, kInputGradient>(w, wstep, ahead, in, tstride, np, count, first, sums);
    case 2: return block<2, kInputGradient>(w, wstep, ahead, in, tstride, np, count, first, sums);
    case 3:
      if constexpr (kMaxVectors >= 3) return block<3, kInputGradient>(w, wstep, ahead, in, tstride, np, count, first, sums);
      break;
    default:
      if constexpr (kMaxVectors >= 4) return block<4, kInputGradient>(w, wstep, ahead, in, tstride, np, count, first, sums);
      break;
  }
}

// Filters per group of the weight gradient's packed output gradients.
constexpr int64_t kGroup = 16;

// Filters per weight-gradient block: 9 · OB sums, 4 · OB broadcasts and an
// input in registers.
constexpr int kFilters = simd::kRegisters >= 32 ? 2 : 1;

// Images per chunk of the weight gradient: a channel vector's packed inputs
// for them (16 KiB: 64 images on a 2×2 map, 16 on a 4×4 one) stay in L1
// across a group's filters. (A 4×4 map's whole batch, 64 KiB, did not: two
// threads took as long as oneDNN's GEMMs.)
constexpr int64_t kChunkFloats = 4096;

// The running tap sums `sums` ([OB][9] vectors, from `first`: zeros) of OB
// filters from o and a vector of channels, over `batch` more images of their
// packed inputs x[n][q][L] and output gradients dy[n][p][16] (offset to o).
// The centre tap joins every output pixel to an input, four pairs an image
// in one chain: at an FMA's latency (4-5 cycles) that chain, not the FMAs'
// throughput, bounded the kernel (AVX2's single filter a block: 16 FMAs an
// image in 20 cycles of chain), so even and odd images sum the centre
// apart, joined (even + odd) at the end of the call.
template <int OB, int kSide>
void weight_block(const float* x, const float* dy, int64_t batch, bool first, float* sums) {
  constexpr int Q = Map<kSide>::kInputs;
  constexpr int kCentre = 4;
  Vec a[OB][9], odd[OB];
  for (int ob = 0; ob < OB; ++ob) {
    for (int j = 0; j < 9; ++j) a[ob][j] = first ? Vec{} : simd::load<Vec>(sums + (ob * 9 + j) * L);
    odd[ob] = Vec{};
  }
  // One image's pairs into a, its centre into centre[ob].
  auto image = [&](const float* xn, const float* dn, Vec* centre) {
    Vec b[OB][4];
    for (int ob = 0; ob < OB; ++ob)
      for (int p = 0; p < 4; ++p) b[ob][p] = simd::pinned(simd::broadcast<Vec>(dn[p * kGroup + ob]));
    // Each tap's pairs in the order of their input pixels, which is the
    // order of their output pixels too (q − s·p is the tap's offset).
#pragma GCC unroll 16
    for (int q = 0; q < Q; ++q) {
      const Vec xv = simd::pinned(simd::load<Vec>(xn + q * L));
      for (int ob = 0; ob < OB; ++ob)
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          const int j = Map<kSide>::tap(p, q);
          if (j == kCentre) centre[ob] = simd::fma(b[ob][p], xv, centre[ob]);
          else if (j >= 0) a[ob][j] = simd::fma(b[ob][p], xv, a[ob][j]);
        }
    }
  };
  Vec even[OB];
  for (int ob = 0; ob < OB; ++ob) even[ob] = a[ob][kCentre];
  int64_t n = 0;
  for (; n + 2 <= batch; n += 2, x += 2 * Q * L, dy += 2 * 4 * kGroup) {
    image(x, dy, even);
    image(x + Q * L, dy + 4 * kGroup, odd);
  }
  if (n < batch) image(x, dy, even);
  for (int ob = 0; ob < OB; ++ob) a[ob][kCentre] = even[ob] + odd[ob];
  for (int ob = 0; ob < OB; ++ob)
    for (int j = 0; j < 9; ++j) simd::store(sums + (ob * 9 + j) * L, a[ob][j]);
}

// dw[o][c][·] for `filters` filters from o and the `lanes` channels from c,
// from their tap sums ([filters][9] vectors): each channel's nine floats in a row.
void write_taps(const float* sums, int64_t filters, int64_t C, int lanes, float* dw) {
  for (int64_t f = 0; f < filters; ++f, sums += 9 * L, dw += C * 9)
    for (int l = 0; l < lanes; ++l)
      for (int j = 0; j < 9; ++j) dw[l * 9 + j] = sums[j * L + l];
}

template <int kSide>
void weight_gradient_on(const float* xs, const float* ds, int64_t batch, int64_t C, int64_t o0, int64_t o1,
                        float* dw) {
  constexpr int Q = Map<kSide>::kInputs;
  constexpr int64_t chunk = std::max<int64_t>(1, kChunkFloats / (Q * L));
  // A group's running sums (16 · 9 vectors) and output gradients (16 KiB
  // over a batch of 64) stay in L1 across its channel vectors.
  alignas(64) float sums[kGroup * 9 * L];
  for (int64_t g0 = o0; g0 < o1; g0 += kGroup) {
    const int64_t g1 = std::min(o1, g0 + kGroup);
    const float* dg = ds + g0 / kGroup * batch * 4 * kGroup;
    for (int64_t v = 0; v < channel_vectors(C); ++v) {
      const int64_t c = v * L;
      const int lanes = static_cast<int>(std::min<int64_t>(L, C - c));
      const float* xv = xs + v * batch * Q * L;
      for (int64_t n0 = 0; n0 < batch; n0 += chunk) {
        const int64_t count = std::min(chunk, batch - n0);
        const float* xn = xv + n0 * Q * L;
        const float* dn = dg + n0 * 4 * kGroup;
        int64_t o = g0;
        for (; o + kFilters <= g1; o += kFilters)
          weight_block<kFilters, kSide>(xn, dn + (o - g0), count, n0 == 0, sums + (o - g0) * 9 * L);
        for (; o < g1; ++o) weight_block<1, kSide>(xn, dn + (o - g0), count, n0 == 0, sums + (o - g0) * 9 * L);
      }
      write_taps(sums, g1 - g0, C, lanes, dw + (g0 * C + c) * 9);
    }
  }
}

}  // namespace

int64_t padded_batch(int64_t batch) { return (batch + L - 1) / L * L; }

void pack(const float* from, int64_t batch, int64_t K, int64_t k0, int64_t k1, float* to) {
  const int64_t np = padded_batch(batch);
  for (int64_t q = 0; q < 4; ++q)
    for (int64_t kb = k0; kb < k1; kb += 16) {
      const int64_t ke = std::min(k1, kb + 16);
      for (int64_t n = 0; n < batch; ++n) {
        const float* f = from + (n * 4 + q) * K;
        for (int64_t k = kb; k < ke; ++k) to[(q * K + k) * np + n] = f[k];
      }
      for (int64_t k = kb; k < ke; ++k) std::fill(to + (q * K + k) * np + batch, to + (q * K + k + 1) * np, 0.0f);
    }
}

void sums(const float* w, int64_t C, bool input_gradient, const float* in, int64_t K, int64_t batch, int64_t r0,
          int64_t r1, const float* bias, float* sums, float* out, int64_t R) {
  const int64_t np = padded_batch(batch), tstride = K * np;
  // W(r, k): the forward's r = o, k = c; the input gradient's r = c, k = o.
  const int64_t rstep = input_gradient ? 9 : C * 9, kstep = input_gradient ? C * 9 : 9;
  // Prefetch the next row's weights (forward: the next filter's, the same
  // channel), or the same filter's a few channels on (input gradient).
  const int64_t ahead = input_gradient ? 8 * 9 : C * 9;
  const int64_t kb_size = input_gradient ? kInputGradientBlock : kBlock;
  for (int64_t kb = 0; kb < K; kb += kb_size) {
    const int64_t count = std::min(kb_size, K - kb);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t n0 = 0; n0 < np; n0 += kMaxVectors * L) {
        const int nv = static_cast<int>(std::min<int64_t>(kMaxVectors, (np - n0) / L));
        const float* wk = w + r * rstep + kb * kstep;
        if (input_gradient)
          block_any<true>(nv, wk, kstep, ahead, in + kb * np + n0, tstride, np, count, kb == 0, sums + r * 4 * np + n0);
        else
          block_any<false>(nv, wk, kstep, ahead, in + kb * np + n0, tstride, np, count, kb == 0, sums + r * 4 * np + n0);
      }
  }
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t s = 0; s < 4; ++s) {
      float* o = out + (n * 4 + s) * R;
      for (int64_t r = r0; r < r1; ++r) o[r] = sums[(r * 4 + s) * np + n] + (bias ? bias[r] : 0.0f);
    }
}

int64_t channel_vectors(int64_t C) { return (C + L - 1) / L; }
int64_t filter_groups(int64_t O) { return (O + kGroup - 1) / kGroup; }

// to[v][n][q][0, width) = from[n][q][v · width + ·] for v in [v0, v1) and
// the `pixels` q, zeros past `total`.
static void pack_rows(const float* from, int64_t batch, int64_t pixels, int64_t total, int64_t width, int64_t v0,
                      int64_t v1, float* to) {
  for (int64_t v = v0; v < v1; ++v) {
    const int64_t k = v * width, m = std::min(width, total - k);
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t q = 0; q < pixels; ++q) {
        float* t = to + ((v * batch + n) * pixels + q) * width;
        std::copy(from + (n * pixels + q) * total + k, from + (n * pixels + q) * total + k + m, t);
        std::fill(t + m, t + width, 0.0f);
      }
  }
}

void pack_channels(const float* x, int64_t batch, int64_t pixels, int64_t C, int64_t v0, int64_t v1, float* xs) {
  pack_rows(x, batch, pixels, C, L, v0, v1, xs);
}

void pack_filters(const float* dy, int64_t batch, int64_t O, int64_t g0, int64_t g1, float* ds) {
  pack_rows(dy, batch, 4, O, kGroup, g0, g1, ds);
}

void weight_gradient(int side, const float* xs, const float* ds, int64_t batch, int64_t C, int64_t o0, int64_t o1,
                     float* dw) {
  if (side == 4) return weight_gradient_on<4>(xs, ds, batch, C, o0, o1, dw);
  weight_gradient_on<2>(xs, ds, batch, C, o0, o1, dw);
}

}  // namespace convoy::cpu::taps2x2
