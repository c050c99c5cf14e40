// Global average pooling, our own kernel over the activation layout.
#include "backends/cpu/ops.h"

namespace convoy::cpu {
namespace {

// Mean over all pixels of each channel: [N, H, W, C] -> [N, C] (or the same
// memory as [N, C, 1, 1]); backward spreads diff_dst / (H*W) over the pixels.
class GlobalAvgPoolOp final : public CpuOp {
 public:
  GlobalAvgPoolOp(int64_t n, int64_t pixels, int64_t c) : n_(n), pixels_(pixels), c_(c) {}

  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }

  void forward(DnnlEnv&, bool) override {
    const int64_t pixels = pixels_, channels = c_;
    const float inv = 1.0f / static_cast<float>(pixels);
    const float* src = b_.src;
    float* dst = b_.dst;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_; ++n) {
      float* y = dst + n * channels;
      for (int64_t c = 0; c < channels; ++c) y[c] = 0;
      for (int64_t p = 0; p < pixels; ++p) {
        const float* x = src + (n * pixels + p) * channels;
        for (int64_t c = 0; c < channels; ++c) y[c] += x[c];
      }
      for (int64_t c = 0; c < channels; ++c) y[c] *= inv;
    }
  }

  void backward(DnnlEnv&) override {
    if (!b_.diff_src) return;
    const int64_t pixels = pixels_, channels = c_;
    const float inv = 1.0f / static_cast<float>(pixels);
    const float* dy = b_.diff_dst;
    float* dx = b_.diff_src;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t p = 0; p < pixels; ++p) {
        float* x = dx + (n * pixels + p) * channels;
        for (int64_t c = 0; c < channels; ++c) x[c] = dy[n * channels + c] * inv;
      }
  }

 private:
  int64_t n_, pixels_, c_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_global_avg_pool(const Shape& in) {
  return std::make_unique<GlobalAvgPoolOp>(in[0], in[2] * in[3], in[1]);
}

}  // namespace convoy::cpu
