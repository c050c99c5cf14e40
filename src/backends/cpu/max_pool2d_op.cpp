// Max-pool over NHWC activations: our own kernel, since oneDNN 2.6's pooling
// is slow for these small channel counts (4.4 ms for the seed's first pool on
// 2 cores, against ~0.1 ms of memory traffic). The forward pass records which
// window position won (first maximum, as PyTorch) in one byte per output; the
// backward pass routes each output gradient there. Padding never wins.
//   src [N, H, W, C], dst [N, Ho, Wo, C]
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/ops.h"
#include "backends/cpu/pool_geometry.h"
#include "convoy/core/error.h"

namespace convoy::cpu {
namespace {

class MaxPool2dOp final : public CpuOp {
 public:
  MaxPool2dOp(const PoolGeometry& g, int64_t outputs) : g_(g), argmax_(static_cast<std::size_t>(outputs)) {}

  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }

  void forward(DnnlEnv&, bool) override {
    const PoolGeometry g = g_;
    const float* src = b_.src;
    float* dst = b_.dst;
    uint8_t* arg = argmax_.data();
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < g.n; ++n)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t o = ((n * g.oh + oy) * g.ow + ox) * g.c;
          float* y = dst + o;
          uint8_t* a = arg + o;
          for (int64_t c = 0; c < g.c; ++c) {
            y[c] = -std::numeric_limits<float>::infinity();
            a[c] = 0;
          }
          for (int64_t iy = g.y0(oy); iy < g.y1(oy); ++iy)
            for (int64_t ix = g.x0(ox); ix < g.x1(ox); ++ix) {
              const float* x = src + ((n * g.h + iy) * g.w + ix) * g.c;
              const auto pos = static_cast<uint8_t>((iy - oy * g.s + g.top) * g.k + (ix - ox * g.s + g.left));
              for (int64_t c = 0; c < g.c; ++c) {
                const bool better = x[c] > y[c];
                y[c] = better ? x[c] : y[c];
                a[c] = better ? pos : a[c];
              }
            }
        }
  }

  void backward(DnnlEnv&) override {
    if (!b_.diff_src) return;
    const PoolGeometry g = g_;
    const float* dy = b_.diff_dst;
    float* dx = b_.diff_src;
    const uint8_t* arg = argmax_.data();
    const int64_t image = g.h * g.w * g.c;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < g.n; ++n) {
      std::memset(dx + n * image, 0, sizeof(float) * image);
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          const int64_t o = ((n * g.oh + oy) * g.ow + ox) * g.c;
          for (int64_t c = 0; c < g.c; ++c) {
            const int64_t iy = oy * g.s - g.top + arg[o + c] / g.k, ix = ox * g.s - g.left + arg[o + c] % g.k;
            dx[((n * g.h + iy) * g.w + ix) * g.c + c] += dy[o + c];
          }
        }
    }
  }

 private:
  PoolGeometry g_;
  std::vector<uint8_t> argmax_;  // window position of each output's maximum
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_max_pool2d(const nn::LayerPlan& plan, const Shape& in, const Shape& out) {
  const auto& p = std::get<nn::MaxPool2d>(plan.layer);
  require(p.kernel <= 16, plan.name + ": max-pool kernel sizes above 16 are not supported");
  return std::make_unique<MaxPool2dOp>(PoolGeometry(in, out, p.kernel, p.stride, p.padding, plan.name), numel(out));
}

}  // namespace convoy::cpu
