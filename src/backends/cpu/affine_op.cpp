// Affine: y = x * w + b element by element, w and b of one example's shape
// in the canonical layout ([C, H, W] C-major, as PyTorch's) while the
// activations are NHWC: x[n, p, c] pairs with w[c * P + p] (P pixels; a
// vector is P = 1). A frozen layer (trainable = false) leaves dw, db at zero.
//   dx = dy * w;  dw = sum over the batch of dy * x;  db = sum of dy
#include <algorithm>

#include "backends/cpu/ops.h"

namespace convoy::cpu {
namespace {

class AffineOp final : public CpuOp {
 public:
  AffineOp(int64_t batch, int64_t pixels, int64_t channels, bool trainable)
      : n_(batch), p_(pixels), c_(channels), trainable_(trainable) {}

  void bind(DnnlEnv&, const OpBuffers& b) override {
    b_ = b;
    if (!trainable_) std::fill_n(b.grads, 2 * p_ * c_, 0.0f);
  }

  void forward(DnnlEnv&, bool) override {
    const int64_t n_all = n_, pixels = p_, channels = c_, per = p_ * c_;
    const float *x = b_.src, *w = b_.params, *bias = b_.params + per;
    float* y = b_.dst;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < n_all; ++n)
      for (int64_t p = 0; p < pixels; ++p) {
        const int64_t row = (n * pixels + p) * channels;
        for (int64_t c = 0; c < channels; ++c) y[row + c] = x[row + c] * w[c * pixels + p] + bias[c * pixels + p];
      }
  }

  void backward(DnnlEnv&) override {
    const int64_t n_all = n_, pixels = p_, channels = c_, per = p_ * c_;
    const float *x = b_.src, *w = b_.params, *dy = b_.diff_dst;
    float *dx = b_.diff_src, *dw = b_.grads, *db = b_.grads + per;
    const bool params = trainable_;
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < pixels; ++p)
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t k = c * pixels + p;
        float sw = 0, sb = 0;
        for (int64_t n = 0; n < n_all; ++n) {
          const int64_t at = (n * pixels + p) * channels + c;
          if (dx) dx[at] = dy[at] * w[k];
          sw += dy[at] * x[at];
          sb += dy[at];
        }
        if (params) dw[k] = sw, db[k] = sb;
      }
  }

 private:
  int64_t n_, p_, c_;
  bool trainable_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_affine(const nn::LayerPlan& plan, int64_t batch) {
  const Shape& x = plan.input_shape;
  if (x.size() == 3) return std::make_unique<AffineOp>(batch, x[1] * x[2], x[0], plan.trainable);
  return std::make_unique<AffineOp>(batch, 1, numel(x), plan.trainable);
}

}  // namespace convoy::cpu
