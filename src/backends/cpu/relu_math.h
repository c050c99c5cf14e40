#pragma once
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
inline float relu_backward(float x, float dy) { return dy * (x <= 0.0f ? 0.0f : 1.0f); }

}  // namespace convoy::cpu
