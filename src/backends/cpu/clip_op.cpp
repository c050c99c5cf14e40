// Clip (PyTorch's clamp) in the activation layout; own loops rather than
// oneDNN's clip, whose backward passes the gradient strictly inside the bounds
// (hardtanh's) where clamp's includes them, and whose bounds must be finite.
//   y = min(max(x, lo), hi)      d = lo <= x <= hi (NaN: y NaN, d 0)
// An absent bound is infinite: every x passes it.
#include "backends/cpu/ops.h"

namespace convoy::cpu {
namespace {

class ClipOp final : public CpuOp {
 public:
  ClipOp(nn::Clip c, int64_t elements) : c_(c), n_(elements) {}

  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }

  void forward(DnnlEnv&, bool) override {
    const float lo = c_.min, hi = c_.max;
    const float* x = b_.src;
    float* y = b_.dst;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n_; ++i) y[i] = x[i] < lo ? lo : (x[i] > hi ? hi : x[i]);  // NaN falls through
  }

  void backward(DnnlEnv&) override {
    if (!b_.diff_src) return;
    const float lo = c_.min, hi = c_.max;
    const float *x = b_.src, *dy = b_.diff_dst;
    float* dx = b_.diff_src;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n_; ++i) dx[i] = x[i] >= lo && x[i] <= hi ? dy[i] : 0.0f;
  }

 private:
  nn::Clip c_;
  int64_t n_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_clip(const nn::LayerPlan& plan, int64_t batch) {
  return std::make_unique<ClipOp>(std::get<nn::Clip>(plan.layer), batch * numel(plan.input_shape));
}

}  // namespace convoy::cpu
