// Max-pool over NHWC activations: our own kernel, since oneDNN 2.6's pooling
// is slow for these small channel counts (4.4 ms for the seed's first pool on
// 2 cores, against ~0.1 ms of memory traffic). The forward pass records which
// window position won (first maximum, as PyTorch) in one byte per output; the
// backward pass routes each output gradient there. Padding never wins.
//   src [N, H, W, C], dst [N, Ho, Wo, C]
#include <algorithm>
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
          int64_t c0 = 0;
          for (; c0 + 16 <= g.c; c0 += 16) window_max<16>(g, src, n, oy, ox, c0, dst + o + c0, arg + o + c0);
          for (; c0 + 8 <= g.c; c0 += 8) window_max<8>(g, src, n, oy, ox, c0, dst + o + c0, arg + o + c0);
          for (; c0 < g.c; ++c0) window_max<1>(g, src, n, oy, ox, c0, dst + o + c0, arg + o + c0);
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
  // The maximum of one window for Lanes channels from c0, Lanes a
  // compile-time count: the running maxima and positions stay in registers
  // (in the output arrays the compiler must reload them, as a byte store may
  // alias the floats) and the selects compile to blends or conditional moves
  // — a branch per comparison mispredicts half the time on real data, which
  // made this loop take a third of a seed-CNN step. First maximum wins, as
  // PyTorch.
  template <int64_t Lanes>
  static void window_max(const PoolGeometry& g, const float* src, int64_t n, int64_t oy, int64_t ox, int64_t c0,
                         float* y, uint8_t* a) {
    float best[Lanes];
    int32_t where[Lanes];
    for (int64_t l = 0; l < Lanes; ++l) {
      best[l] = -std::numeric_limits<float>::infinity();
      where[l] = 0;
    }
    for (int64_t iy = g.y0(oy); iy < g.y1(oy); ++iy)
      for (int64_t ix = g.x0(ox); ix < g.x1(ox); ++ix) {
        const float* x = src + ((n * g.h + iy) * g.w + ix) * g.c + c0;
        const auto pos = static_cast<int32_t>((iy - oy * g.s + g.top) * g.k + (ix - ox * g.s + g.left));
        for (int64_t l = 0; l < Lanes; ++l) {
          const int32_t better = -static_cast<int32_t>(x[l] > best[l]);  // all ones or zero
          where[l] ^= (where[l] ^ pos) & better;
          best[l] = std::max(best[l], x[l]);  // x[l] only when greater: the same as the test above
        }
      }
    for (int64_t l = 0; l < Lanes; ++l) {
      y[l] = best[l];
      a[l] = static_cast<uint8_t>(where[l]);
    }
  }

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
