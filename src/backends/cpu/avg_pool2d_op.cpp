// Average pooling over NHWC activations, our own kernel (small channel counts,
// as max-pool). The divisor is the whole kernel area with count_include_pad
// (PyTorch's default: padding counts as zeros), else the pixels inside the image.
//   dst[n, oy, ox, c] = sum over the window of src / divisor
//   diff_src[n, y, x, c] = sum over windows holding (y, x) of diff_dst / divisor
#include <cstring>

#include "backends/cpu/ops.h"
#include "backends/cpu/pool_geometry.h"

namespace convoy::cpu {
namespace {

class AvgPool2dOp final : public CpuOp {
 public:
  AvgPool2dOp(const PoolGeometry& g, bool count_include_pad) : g_(g), count_include_pad_(count_include_pad) {}

  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }

  void forward(DnnlEnv&, bool) override {
    const PoolGeometry g = g_;
    const float* src = b_.src;
    float* dst = b_.dst;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          float* y = dst + ((n * g.oh + oy) * g.ow + ox) * g.c;
          for (int64_t c = 0; c < g.c; ++c) y[c] = 0;
          for (int64_t iy = g.y0(oy); iy < g.y1(oy); ++iy)
            for (int64_t ix = g.x0(ox); ix < g.x1(ox); ++ix) {
              const float* x = src + ((n * g.h + iy) * g.w + ix) * g.c;
              for (int64_t c = 0; c < g.c; ++c) y[c] += x[c];
            }
          const float inv = 1.0f / divisor(oy, ox);
          for (int64_t c = 0; c < g.c; ++c) y[c] *= inv;
        }
  }

  void backward(DnnlEnv&) override {
    if (!b_.diff_src) return;
    const PoolGeometry g = g_;
    const float* dy = b_.diff_dst;
    float* dx = b_.diff_src;
    const int64_t image = g.h * g.w * g.c;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < g.n; ++n) {
      std::memset(dx + n * image, 0, sizeof(float) * image);
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const float* d = dy + ((n * g.oh + oy) * g.ow + ox) * g.c;
          const float inv = 1.0f / divisor(oy, ox);
          for (int64_t iy = g.y0(oy); iy < g.y1(oy); ++iy)
            for (int64_t ix = g.x0(ox); ix < g.x1(ox); ++ix) {
              float* x = dx + ((n * g.h + iy) * g.w + ix) * g.c;
              for (int64_t c = 0; c < g.c; ++c) x[c] += d[c] * inv;
            }
        }
    }
  }

 private:
  float divisor(int64_t oy, int64_t ox) const {
    if (count_include_pad_) return static_cast<float>(g_.k * g_.k);
    return static_cast<float>((g_.y1(oy) - g_.y0(oy)) * (g_.x1(ox) - g_.x0(ox)));
  }

  PoolGeometry g_;
  bool count_include_pad_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_avg_pool2d(const nn::LayerPlan& plan, const Shape& in, const Shape& out) {
  const auto& p = std::get<nn::AvgPool2d>(plan.layer);
  return std::make_unique<AvgPool2dOp>(PoolGeometry(in, out, p.kernel, p.stride, p.padding, plan.name),
                                       p.count_include_pad);
}

}  // namespace convoy::cpu
