#pragma once
// Vectors of W floats with their window positions alongside, shared by the
// max-pool kernels over NHWC channels (max_pool2d_op.cpp) and over a planar
// convolution's output planes (planar_pool.cpp): one comparison step, so the
// two pick the same maximum and the same position bit for bit.
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "backends/cpu/simd.h"

namespace convoy::cpu {

// Vectors of W floats (simd.h: one source for every copy) and the window
// positions as W lanes of int32 and of bytes.
template <int W>
struct Lanes {
  using F = simd::VecOf<W>;
  typedef int32_t I __attribute__((vector_size(W * sizeof(int32_t))));
  typedef uint8_t B __attribute__((vector_size(W)));
  typedef uint8_t Bytes __attribute__((vector_size(W * sizeof(int32_t))));  // an I seen as bytes
};

// One tap of a running maximum: x at window position p replaces the best so
// far only when greater, so the first maximum wins (as PyTorch) and a NaN
// never does. The selects compile to blends: a branch per comparison would
// mispredict half the time on real data.
template <int W>
inline void take_greater(typename Lanes<W>::F x, int32_t p, typename Lanes<W>::F& best, typename Lanes<W>::I& where) {
  const typename Lanes<W>::I greater = x > best;
  where = greater ? typename Lanes<W>::I{} + p : where;
  best = greater ? x : best;
}

// The low byte of each lane (positions are below 256), and back: data
// movement only, the same values in every copy. __builtin_convertvector is
// one instruction with AVX-512 (vpmovdb, vpmovzxbd), but GCC 12 lowers it
// lane by lane through general registers without (the AVX2 copy's pool ran
// at half speed): there byte shuffles narrow, and vpmovzxbd widens in the
// AVX2 copy.
template <int W>
typename Lanes<W>::B narrow(typename Lanes<W>::I w) {
#if defined(__AVX512F__)
  return __builtin_convertvector(w, typename Lanes<W>::B);
#else
  const auto v = reinterpret_cast<typename Lanes<W>::Bytes>(w);
  return [&]<int... J>(std::integer_sequence<int, J...>) {
    return __builtin_shufflevector(v, v, (4 * J)...);
  }(std::make_integer_sequence<int, W>{});
#endif
}
template <int W>
typename Lanes<W>::I widen(const uint8_t* a) {
  // GCC 12 lowers the conversion below lane by lane in the AVX-512 copy too
  // (the 20-channel pool's backward pass: 0.053 -> 0.037 ms with vpmovzxbd).
#if defined(__AVX512F__)
  if constexpr (W == 16)
    return reinterpret_cast<typename Lanes<W>::I>(
        _mm512_maskz_cvtepu8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(a))));
#endif
#if defined(__AVX2__)
  if constexpr (W == 8)
    return reinterpret_cast<typename Lanes<W>::I>(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a))));
#endif
  typename Lanes<W>::B b;
  std::memcpy(&b, a, W);
  return __builtin_convertvector(b, typename Lanes<W>::I);
}

template <int W>
void store_bytes(uint8_t* a, typename Lanes<W>::I w) {
  const typename Lanes<W>::B bytes = narrow<W>(w);
  std::memcpy(a, &bytes, W);
}

}  // namespace convoy::cpu
