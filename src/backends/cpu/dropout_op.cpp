// Dropout, our own kernel over the activation layout. Training: every element
// is kept with probability 1 - rate and scaled by 1 / (1 - rate), else zeroed;
// the mask is a function of (seed, training step, example, element) that
// every device evaluates alike (backends/dropout_mask.h), so it does not
// depend on the thread count and stays fixed between training steps
// (loss_and_gradients calls see one mask: what a gradient check needs); the
// step is the count of applied steps the Program keeps (OpBuffers::steps_done).
// Inference: a copy.
//   dst = src * mask;  diff_src = diff_dst * mask
#include <cstring>
#include <vector>

#include "backends/cpu/ops.h"
#include "backends/dropout_mask.h"

namespace convoy::cpu {
namespace {

class DropoutOp final : public CpuOp {
 public:
  DropoutOp(float rate, int64_t batch, int64_t example, uint64_t seed)
      : rate_(rate), batch_(batch), example_(example), seed_(seed),
        mask_(static_cast<std::size_t>(batch * example)) {}

  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }

  void forward(DnnlEnv&, bool training) override {
    const int64_t total = batch_ * example_;
    if (!training || rate_ == 0) {
      std::memcpy(b_.dst, b_.src, sizeof(float) * total);
      std::fill(mask_.begin(), mask_.end(), 1.0f);
      return;
    }
    const float keep_scale = 1.0f / (1.0f - rate_), rate = rate_;
    const int64_t example = example_;
    const float* x = b_.src;
    float* y = b_.dst;
    float* mask = mask_.data();
    const int64_t step = b_.steps_done ? *b_.steps_done : 0;  // unbound: an op timed alone
    const int64_t first = b_.first_example, of = b_.mask_batch > 0 ? b_.mask_batch : batch_;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < batch_; ++n) {
      const uint64_t stream = dropout_example_stream(seed_, step, of, first + n);
      for (int64_t k = 0; k < example; ++k) {
        const int64_t i = n * example + k;
        mask[i] = dropout_drops(stream, k, rate) ? 0.0f : keep_scale;
        y[i] = x[i] * mask[i];
      }
    }
  }

  void backward(DnnlEnv&) override {
    if (!b_.diff_src) return;
    const int64_t total = batch_ * example_;
    const float *dy = b_.diff_dst, *mask = mask_.data();
    float* dx = b_.diff_src;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < total; ++i) dx[i] = dy[i] * mask[i];
  }

 private:
  float rate_;
  int64_t batch_, example_;
  uint64_t seed_;
  std::vector<float> mask_;  // 0 or 1 / (1 - rate), per element of the batch
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_dropout(const nn::LayerPlan& plan, int64_t batch, uint64_t seed) {
  return std::make_unique<DropoutOp>(std::get<nn::Dropout>(plan.layer).rate, batch, numel(plan.output_shape), seed);
}

}  // namespace convoy::cpu
