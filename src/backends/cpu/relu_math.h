#pragma once
#include <bit>
#include <cstdint>
// oneDNN's ReLU (eltwise_relu, alpha 0, as EltwiseOp runs it), element by
// element, for the ops that run a ReLU fused into their own passes
// (conv_pool_op.h): the same bits, -0 and NaN included (measured against
// oneDNN 2.6's jit kernels, sse41 to avx512_core):
//   forward:  x > 0 ? x : +0              (vmaxps x, 0: -0, -inf and NaN give +0)
//   backward: dy * (x <= 0 ? 0 : 1)       (a NaN x passes dy; a masked dy gives
//                                          -0 when negative, NaN when infinite)
// x is the ReLU's input, which the fused op recomputes where it needs it.
namespace convoy::cpu {

inline float relu_forward(float x) { return x > 0.0f ? x : 0.0f; }

// The backward's 1 or 0, !(x <= 0), from x's bits: x > 0 (a positive sign
// with nonzero bits: +denormals up to +inf, and +NaN) or x a NaN of either
// sign. Why not the float comparison: GCC 12 cannot vectorise a float
// comparison's mask beside the BN's double sums for AVX2 (it can with
// AVX-512's mask registers), and under the default trapping math it turns
// the ?: into a branch; on a ReLU's random signs that branch mispredicted
// half the time and made the fused BN's backward 4-10x slower on AVX2
// (docs/benchmarks.md). Integer comparisons vectorise on both.
inline float relu_keeps(float x) {
  const int32_t bits = std::bit_cast<int32_t>(x);
  const int32_t keep = (bits > 0) | ((bits & 0x7fffffff) > 0x7f800000);
  return static_cast<float>(keep);
}
inline float relu_backward(float x, float dy) { return dy * relu_keeps(x); }

}  // namespace convoy::cpu
