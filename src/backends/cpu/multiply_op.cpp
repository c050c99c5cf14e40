// x times a gate, in the activation layout: element-wise when the gate has x's
// shape, else one gate value per example and channel (squeeze-and-excitation).
// NHWC keeps channels innermost, so x is [N, P, C] with P pixels and the
// per-channel gate [N, C] (a [C, 1, 1] gate is the same memory).
//   dst = x * g;  diff_x = diff_dst * g;  diff_g = diff_dst * x (summed over P)
#include "backends/cpu/ops.h"

namespace convoy::cpu {
namespace {

class MultiplyOp final : public CpuOp {
 public:
  // pixels = 1 and channels = all of an example's elements: element-wise.
  MultiplyOp(int64_t batch, int64_t pixels, int64_t channels) : n_(batch), p_(pixels), c_(channels) {}

  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }

  void forward(DnnlEnv&, bool) override {
    const int64_t pixels = p_, channels = c_;
    const float *x = b_.srcs[0], *g = b_.srcs[1];
    float* y = b_.dst;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t p = 0; p < pixels; ++p) {
        const int64_t row = (n * pixels + p) * channels;
        for (int64_t c = 0; c < channels; ++c) y[row + c] = x[row + c] * g[n * channels + c];
      }
  }

  void backward(DnnlEnv&) override {
    const int64_t pixels = p_, channels = c_;
    const float *x = b_.srcs[0], *g = b_.srcs[1], *dy = b_.diff_dst;
    float *dx = b_.diff_srcs[0], *dg = b_.diff_srcs[1];
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_; ++n) {
      if (dg)
        for (int64_t c = 0; c < channels; ++c) dg[n * channels + c] = 0;
      for (int64_t p = 0; p < pixels; ++p) {
        const int64_t row = (n * pixels + p) * channels;
        if (dx)
          for (int64_t c = 0; c < channels; ++c) dx[row + c] = dy[row + c] * g[n * channels + c];
        if (dg)
          for (int64_t c = 0; c < channels; ++c) dg[n * channels + c] += dy[row + c] * x[row + c];
      }
    }
  }

 private:
  int64_t n_, p_, c_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_multiply(const nn::LayerPlan& plan, int64_t batch) {
  const Shape& x = plan.input_shapes[0];
  if (plan.input_shapes[1] == x) return std::make_unique<MultiplyOp>(batch, 1, numel(x));
  return std::make_unique<MultiplyOp>(batch, x[1] * x[2], x[0]);
}

}  // namespace convoy::cpu
