#pragma once
// The one-dimensional Winograd transforms of F(2, 3) and F(4, 3), over T =
// simd::Vec or float: winograd_conv.cpp applies each to the columns, then to
// the rows, of a tile. Each struct K holds, for tiles of K::m outputs read
// from K::n = K::m + 2 inputs:
//   input:   y = Bᵀ x (n → n); turned: the input gradient's B'ᵀ
//   output:  y = Aᵀ x (n → m); turned: the input gradient's A'ᵀ
//   gradient:        y = A e  (m → n), the adjoint of the output transform
//   kernel:          y = G g  (3 → n)
//   kernel_gradient: y = Gᵀ s (n → 3), the adjoint of the kernel transform
// and turned_slots: where the input gradient's position k lives in U.
//
// The input gradient is a forward pass of dY through each kernel turned 180°
// (g' = R g R, R reversing 3 taps) with C and O swapped. With G' = G R, its
// transformed kernel G' g' G'ᵀ = G g Gᵀ is U itself; G' is the kernel
// transform of the interpolation points 1/p (row k of G R evaluates the
// turned kernel at 1/p_k), so the turned B', A' are those of the points 1/p.
//
// The matrices were derived here (Toom-Cook from the points, checked exactly
// in rational arithmetic), not copied:
//
// F(2, 3), points (0, 1, -1, ∞):
//   Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//   G  = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]
//   Aᵀ = [1 1 1 0; 0 1 -1 -1]
// 1/p is the same set with 0 ↔ ∞, so the turned transforms are these with
// positions 0 ↔ 3 swapped in rows and columns (turned_slots).
//
// F(4, 3), points (0, 1, -1, ½, -2, ∞): of the sets of six points built from
// 0, ±1, ±2, ±½ and ∞ this one had the smallest float error (measured on
// random 64-channel tiles: max error / max output 3.1e-6 against 6.6e-6 for
// (0, ±1, ±2, ∞), 4.1e-7 for F(2, 3)): the ½ and -2 rows of G are small.
//   Bᵀ = [1 -3/2 -2 3/2 1 0;  0 -1 ½ 5/2 1 0;  0 1 -5/2 ½ 1 0;
//         0 -2 -1 2 1 0;      0 ½ -1 -½ 1 0;  0 1 -3/2 -2 3/2 1]
//   G  = [1 0 0;  ⅓ ⅓ ⅓;  -⅓ ⅓ -⅓;  -16/15 -8/15 -4/15;  1/15 -2/15 4/15;  0 0 1]
//   Aᵀ = [1 1 1 1 1 0;  0 1 -1 ½ -2 0;  0 1 1 ¼ 4 0;  0 1 -1 ⅛ -8 1]
// 1/p = (∞, 1, -1, 2, -½, 0) in the same slots (turned_slots = identity),
// with powers of two moved between B' and A' (exact in floats):
//   B'ᵀ = [0 1 3/2 -2 -3/2 1;  0 1 5/2 ½ -1 0;  0 -1 -½ 5/2 -1 0;
//          0 1 2 -1 -2 0;      0 1 -½ -1 ½ 0;  1 3/2 -2 -3/2 1 0]
//   A'ᵀ = [0 1 1 ⅛ -8 1;  0 1 -1 ¼ 4 0;  0 1 1 ½ -2 0;  1 1 -1 1 1 0]
#include <array>

namespace convoy::cpu::winograd {

template <int P>
constexpr std::array<int, P> identity_slots() {
  std::array<int, P> s{};
  for (int k = 0; k < P; ++k) s[k] = k;
  return s;
}

struct F2 {
  static constexpr int m = 2, n = 4;
  // 0 ↔ 3 swapped in rows and columns: the points 0 and ∞ trade places.
  static constexpr std::array<int, 16> turned_slots = {15, 13, 14, 12, 7, 5, 6, 4, 11, 9, 10, 8, 3, 1, 2, 0};

  template <bool turned, class T>
  static void input(const T* x, T* y) {
    y[0] = x[0] - x[2];
    y[1] = x[1] + x[2];
    y[2] = x[2] - x[1];
    y[3] = x[1] - x[3];
  }
  template <bool turned, class T>
  static void output(const T* x, T* y) {
    y[0] = x[0] + x[1] + x[2];
    y[1] = x[1] - x[2] - x[3];
  }
  template <class T>
  static void gradient(const T* e, T* y) {
    y[0] = e[0];
    y[1] = e[0] + e[1];
    y[2] = e[0] - e[1];
    y[3] = -e[1];
  }
  template <class T>
  static void kernel(const T* g, T* y) {
    y[0] = g[0];
    y[1] = 0.5f * (g[0] + g[1] + g[2]);
    y[2] = 0.5f * (g[0] - g[1] + g[2]);
    y[3] = g[2];
  }
  template <class T>
  static void kernel_gradient(const T* s, T* y) {
    y[0] = s[0] + 0.5f * (s[1] + s[2]);
    y[1] = 0.5f * (s[1] - s[2]);
    y[2] = 0.5f * (s[1] + s[2]) + s[3];
  }
};

struct F4 {
  static constexpr int m = 4, n = 6;
  static constexpr std::array<int, 36> turned_slots = identity_slots<36>();

  template <bool turned, class T>
  static void input(const T* x, T* y) {
    if constexpr (!turned) {
      const T d31 = x[3] - x[1], d42 = x[4] - x[2];
      y[0] = x[0] - 2.0f * x[2] + x[4] + 1.5f * d31;
      y[1] = x[4] - x[1] + 0.5f * x[2] + 2.5f * x[3];
      y[2] = x[4] + x[1] - 2.5f * x[2] + 0.5f * x[3];
      y[3] = d42 + 2.0f * d31;
      y[4] = d42 - 0.5f * d31;
      y[5] = x[5] + x[1] - 2.0f * x[3] + 1.5f * d42;
    } else {
      const T d13 = x[1] - x[3], d24 = x[2] - x[4];
      y[0] = x[5] + x[1] - 2.0f * x[3] + 1.5f * d24;
      y[1] = x[1] - x[4] + 2.5f * x[2] + 0.5f * x[3];
      y[2] = 2.5f * x[3] - x[1] - x[4] - 0.5f * x[2];
      y[3] = d13 + 2.0f * d24;
      y[4] = d13 - 0.5f * d24;
      y[5] = x[0] - 2.0f * x[2] + x[4] + 1.5f * d13;
    }
  }
  template <bool turned, class T>
  static void output(const T* x, T* y) {
    const T p = x[1] + x[2], q = x[1] - x[2];
    if constexpr (!turned) {
      y[0] = x[0] + p + x[3] + x[4];
      y[1] = q + 0.5f * x[3] - 2.0f * x[4];
      y[2] = p + 0.25f * x[3] + 4.0f * x[4];
      y[3] = q + 0.125f * x[3] - 8.0f * x[4] + x[5];
    } else {
      y[0] = p + 0.125f * x[3] - 8.0f * x[4] + x[5];
      y[1] = q + 0.25f * x[3] + 4.0f * x[4];
      y[2] = p + 0.5f * x[3] - 2.0f * x[4];
      y[3] = x[0] + q + x[3] + x[4];
    }
  }
  template <class T>
  static void gradient(const T* e, T* y) {
    const T a = e[0] + e[2], b = e[1] + e[3];
    y[0] = e[0];
    y[1] = a + b;
    y[2] = a - b;
    y[3] = e[0] + 0.5f * e[1] + 0.25f * e[2] + 0.125f * e[3];
    y[4] = e[0] - 2.0f * e[1] + 4.0f * e[2] - 8.0f * e[3];
    y[5] = e[3];
  }
  template <class T>
  static void kernel(const T* g, T* y) {
    constexpr float third = 1.0f / 3, fifteenth = 1.0f / 15;
    y[0] = g[0];
    y[1] = third * (g[0] + g[1] + g[2]);
    y[2] = -third * (g[0] - g[1] + g[2]);
    y[3] = (-4 * fifteenth) * (4.0f * g[0] + 2.0f * g[1] + g[2]);
    y[4] = fifteenth * (g[0] - 2.0f * g[1] + 4.0f * g[2]);
    y[5] = g[2];
  }
  template <class T>
  static void kernel_gradient(const T* s, T* y) {
    constexpr float third = 1.0f / 3, fifteenth = 1.0f / 15;
    const T plus = third * (s[1] + s[2]), minus = third * (s[1] - s[2]);
    y[0] = s[0] + minus + fifteenth * (s[4] - 16.0f * s[3]);
    y[1] = plus - (2 * fifteenth) * (4.0f * s[3] + s[4]);
    y[2] = minus + (4 * fifteenth) * (s[4] - s[3]) + s[5];
  }
};

}  // namespace convoy::cpu::winograd
