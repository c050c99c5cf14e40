#pragma once
// A filter's k·k taps moved between innermost (PyTorch's W[c][j], j = ky·k +
// kx) and outermost (Wr[j][c]): the order the GEMM-based convolutions
// (small_map_conv.h, strided_gemm_conv.h) multiply in, and back for dW.
#include <cstdint>

namespace convoy::cpu {

// wr[j · C + c] = w[c · kk + j]
void taps_outward(const float* w, float* wr, int64_t C, int64_t kk);
// w[c · kk + j] = wr[j · C + c]
void taps_inward(const float* wr, float* w, int64_t C, int64_t kk);

}  // namespace convoy::cpu
