// Max-pool over NHWC activations: our own kernel, since oneDNN 2.6's pooling
// is slow for these small channel counts (4.4 ms for the seed's first pool on
// 2 cores, against ~0.1 ms of memory traffic). The forward pass records which
// window position won (first maximum, as PyTorch) in one byte per output; the
// backward pass routes each output gradient there.
//   src [N, H, W, C], dst [N, Ho, Wo, C], no padding
#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/ops.h"
#include "convoy/core/error.h"

namespace convoy::cpu {
namespace {

class MaxPool2dOp final : public CpuOp {
 public:
  MaxPool2dOp(const nn::MaxPool2d& p, const Shape& in, const Shape& out)
      : n_(in[0]), c_(in[1]), h_(in[2]), w_(in[3]), oh_(out[2]), ow_(out[3]), k_(p.kernel),
        s_(p.stride ? p.stride : p.kernel), argmax_(static_cast<std::size_t>(numel(out))) {}

  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }

  void forward(DnnlEnv&, bool) override {
    const float* src = b_.src;
    float* dst = b_.dst;
    uint8_t* arg = argmax_.data();
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_; ++n)
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox) {
          const int64_t o = ((n * oh_ + oy) * ow_ + ox) * c_;
          float* y = dst + o;
          uint8_t* a = arg + o;
          for (int64_t c = 0; c < c_; ++c) {
            y[c] = -std::numeric_limits<float>::infinity();
            a[c] = 0;
          }
          for (int64_t ky = 0; ky < k_; ++ky)
            for (int64_t kx = 0; kx < k_; ++kx) {
              const float* x = src + ((n * h_ + oy * s_ + ky) * w_ + ox * s_ + kx) * c_;
              const auto pos = static_cast<uint8_t>(ky * k_ + kx);
              for (int64_t c = 0; c < c_; ++c) {
                const bool better = x[c] > y[c];
                y[c] = better ? x[c] : y[c];
                a[c] = better ? pos : a[c];
              }
            }
        }
  }

  void backward(DnnlEnv&) override {
    if (!b_.diff_src) return;
    const float* dy = b_.diff_dst;
    float* dx = b_.diff_src;
    const uint8_t* arg = argmax_.data();
    const int64_t image = h_ * w_ * c_;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < n_; ++n) {
      std::memset(dx + n * image, 0, sizeof(float) * image);
      for (int64_t oy = 0; oy < oh_; ++oy)
        for (int64_t ox = 0; ox < ow_; ++ox) {
          const int64_t o = ((n * oh_ + oy) * ow_ + ox) * c_;
          for (int64_t c = 0; c < c_; ++c) {
            const int64_t ky = arg[o + c] / k_, kx = arg[o + c] % k_;
            dx[((n * h_ + oy * s_ + ky) * w_ + ox * s_ + kx) * c_ + c] += dy[o + c];
          }
        }
    }
  }

 private:
  int64_t n_, c_, h_, w_, oh_, ow_, k_, s_;
  std::vector<uint8_t> argmax_;  // window position of each output's maximum
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_max_pool2d(DnnlEnv&, const nn::MaxPool2d& p, const Shape& in, const Shape& out) {
  require(p.kernel <= 16, "max_pool2d: kernel sizes above 16 are not supported");
  return std::make_unique<MaxPool2dOp>(p, in, out);
}

}  // namespace convoy::cpu
