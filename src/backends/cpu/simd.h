#pragma once
// One vector type for the CPU backend's own kernels, as wide as the
// instruction set this copy is compiled for (cmake/isa_units.cmake compiles
// every kernel source once per set): 16 floats in the AVX-512 copy, 8 in the
// AVX2 copy, 4 in the baseline (SSE2) copy.
//
// Why one type instead of intrinsics per set: a kernel written once over
// simd::Vec (or over VecOf<W> with the width as a template parameter) is the
// same logic in every copy, so the tests that run it on an AVX2 machine test
// the code an AVX-512 machine runs, only wider. GCC and clang lower the
// vector extension's + - * to the set's instructions; a width the set lacks
// (VecOf<16> in the AVX2 copy) becomes two or four native registers.
//
// Loads and stores go through memcpy: clang ignores a lowered alignment on a
// vector type and would emit aligned moves that fault on unaligned pointers.
#include <cstdint>
#include <cstring>

namespace convoy::cpu::simd {

#if defined(__AVX512F__)
inline constexpr int kLanes = 16;
#elif defined(__AVX__)
inline constexpr int kLanes = 8;
#else
inline constexpr int kLanes = 4;
#endif

// Vector registers the set has: a register tile of sums, the operands
// loaded for them and one broadcast must fit, or the sums spill to memory.
#if defined(__AVX512F__)
inline constexpr int kRegisters = 32;
#else
inline constexpr int kRegisters = 16;  // AVX2's ymm0-15, SSE2's xmm0-15
#endif

// Through a class: GCC drops the vector_size attribute of an alias template
// whose size depends on its parameter (VecOf<8> would be a plain float).
template <int W>
struct VecType {
  typedef float type __attribute__((vector_size(W * sizeof(float))));
};
template <int W>
using VecOf = typename VecType<W>::type;
using Vec = VecOf<kLanes>;
static_assert(sizeof(Vec) == kLanes * sizeof(float), "Vec holds kLanes floats");

// The lane count of a vector type.
template <class V>
inline constexpr int lanes = sizeof(V) / sizeof(float);

template <class V>
inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V>
inline void store(float* p, V v) {
  std::memcpy(p, &v, sizeof v);
}

// x − 0 rather than 0 + x: the same value for every x (−0 − 0 is −0), so the
// compiler drops the subtraction and emits one broadcast (or folds it into
// an FMA's memory operand); 0 + x is +0 for x = −0 and cost a scalar add.
template <class V>
inline V broadcast(float x) {
  return x - V{};
}

// to[0, n) = from[0, n) for n < 2W: two W-float vectors, the second ending
// at n (overlapping the first: the same values written twice), or half as
// wide below W.
template <int W>
inline void copy_short(const float* from, int64_t n, float* to) {
  if constexpr (W == 1) {
    if (n == 1) to[0] = from[0];
  } else if (n >= W) {
    store(to, load<VecOf<W>>(from));
    store(to + n - W, load<VecOf<W>>(from + n - W));
  } else {
    copy_short<W / 2>(from, n, to);
  }
}

// to[0, n) = from[0, n) for a row that does not overlap `from`, inline:
// vectors, the last ending at n. std::copy_n of a length known only at run
// time is a call to memmove, which costs as much as the copy on rows of tens
// of floats (a staged image row, a pixel's channels).
inline void copy_row(const float* from, int64_t n, float* to) {
  if (n < kLanes) return copy_short<kLanes / 2>(from, n, to);
  for (int64_t i = 0; i + kLanes < n; i += kLanes) store(to + i, load<Vec>(from + i));
  store(to + n - kLanes, load<Vec>(from + n - kLanes));
}

// a·b + c. With FMA in the set (the AVX2 and AVX-512 copies) the compiler
// contracts this to one fused instruction, so results differ from the
// baseline copy in the last bit; each copy is deterministic on its own.
template <class V>
inline V fma(V a, V b, V c) {
  return a * b + c;
}

// Lane-wise maximum; a NaN in `b` is not propagated (the x86 maxps rule).
template <class V>
inline V max(V a, V b) {
  return a > b ? a : b;
}

// The sum of n floats (n a power of two) in a fixed pairwise order: lanes of
// per-lane sums reduced the same way every run.
template <int N>
inline float sum_lanes(const float* s) {
  if constexpr (N == 1) return s[0];
  else return sum_lanes<N / 2>(s) + sum_lanes<N / 2>(s + N / 2);
}

// v, kept in a register: an empty asm the compiler cannot see through, so a
// loaded vector used by several FMAs is loaded once rather than folded into
// each as a memory operand (GCC's choice, which makes loads the limit).
template <class V>
inline V pinned(V v) {
  static_assert(sizeof(V) <= kLanes * sizeof(float), "one native register");
#if defined(__AVX512F__)
  asm("" : "+v"(v));
#else
  asm("" : "+x"(v));
#endif
  return v;
}

}  // namespace convoy::cpu::simd
