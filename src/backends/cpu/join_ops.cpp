// The functional API's joins in the activation layout. Both layouts convoy
// uses keep channels innermost (NHWC images, [N, features] vectors), so a
// join works on rows: one row per pixel (or per example) of C channels.
//   add:    dst = sum_k src_k;              diff_src_k = diff_dst
//   concat: dst row = [src_0 row, src_1 row, ...]; diff_src_k = its slice of diff_dst
// A two-input add may run its only reader, a ReLU, fused (conv_pool_op.h):
// it writes relu(a + b) into the ReLU's output and, backward, the ReLU's
// output gradient masked by a + b (relu_math.h) into both input gradients;
// its own output and output gradient are never written. The mask reads the
// ReLU's output (one stream, not two) unless the forward met a NaN sum,
// where that output (+0) no longer tells: then it recomputes a + b.
#include <omp.h>

#include <cstring>
#include <memory>
#include <utility>

#include "backends/cpu/ops.h"
#include "backends/cpu/relu_math.h"

namespace convoy::cpu {
namespace {

class AddOp final : public CpuOp {
 public:
  explicit AddOp(int64_t elements) : elements_(elements) {}
  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }
  void forward(DnnlEnv&, bool) override {
    float* dst = b_.dst;
    const float* a = b_.srcs[0];
    const float* c = b_.srcs[1];
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < elements_; ++i) dst[i] = a[i] + c[i];
    for (std::size_t k = 2; k < b_.srcs.size(); ++k) {
      const float* s = b_.srcs[k];
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < elements_; ++i) dst[i] += s[i];
    }
  }
  // Each input's gradient is a copy of dst's, split over the threads: on
  // one thread the copies of ResNet-18's adds took as long as on two.
  void backward(DnnlEnv&) override {
    const float* from = b_.diff_dst;
#pragma omp parallel
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t begin = elements_ * t / nt, end = elements_ * (t + 1) / nt;
      for (float* d : b_.diff_srcs)
        if (d && begin < end) std::memcpy(d + begin, from + begin, sizeof(float) * (end - begin));
    }
  }

 private:
  int64_t elements_;
  OpBuffers b_;
};

// Add (two inputs) → ReLU in one op. relu: the ReLU's buffers, bound after this op.
class AddReluOp final : public CpuOp {
 public:
  AddReluOp(int64_t elements, std::shared_ptr<const OpBuffers> relu) : elements_(elements), relu_(std::move(relu)) {}
  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }
  void forward(DnnlEnv&, bool) override {
    float* y = relu_->dst;
    const float *a = b_.srcs[0], *c = b_.srcs[1];
    int nan = 0;
#pragma omp parallel for simd schedule(static) reduction(| : nan)
    for (int64_t i = 0; i < elements_; ++i) {
      const float v = a[i] + c[i];
      nan |= v != v;
      y[i] = relu_forward(v);
    }
    saw_nan_ = nan != 0;
  }
  // Both gradients in one pass; with one wanted, it is written twice.
  void backward(DnnlEnv&) override {
    const float *a = b_.srcs[0], *c = b_.srcs[1];
    if (saw_nan_) return backward_masked_by([a, c](int64_t i) { return a[i] + c[i]; });
    // Without NaNs, y <= 0 exactly where a + b <= 0.
    backward_masked_by([y = relu_->dst](int64_t i) { return y[i]; });
  }

 private:
  // v(i): the ReLU's input at i, or anything <= 0 exactly where it is.
  template <class ReluInput> void backward_masked_by(ReluInput v) {
    float *d0 = b_.diff_srcs[0] ? b_.diff_srcs[0] : b_.diff_srcs[1], *d1 = b_.diff_srcs[1] ? b_.diff_srcs[1] : d0;
    if (!d0) return;
    const float* dy = relu_->diff_dst;
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < elements_; ++i) {
      const float d = relu_backward(v(i), dy[i]);
      d0[i] = d;
      d1[i] = d;
    }
  }

  int64_t elements_;
  std::shared_ptr<const OpBuffers> relu_;
  bool saw_nan_ = false;  // the last forward's a + b held a NaN
  OpBuffers b_;
};

class ConcatOp final : public CpuOp {
 public:
  ConcatOp(int64_t rows, std::vector<int64_t> widths) : rows_(rows), widths_(std::move(widths)) {
    for (int64_t w : widths_) total_ += w;
  }
  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }
  void forward(DnnlEnv&, bool) override {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      float* out = b_.dst + r * total_;
      for (std::size_t k = 0; k < widths_.size(); ++k) {
        std::memcpy(out, b_.srcs[k] + r * widths_[k], sizeof(float) * widths_[k]);
        out += widths_[k];
      }
    }
  }
  void backward(DnnlEnv&) override {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      const float* in = b_.diff_dst + r * total_;
      for (std::size_t k = 0; k < widths_.size(); ++k) {
        if (b_.diff_srcs[k]) std::memcpy(b_.diff_srcs[k] + r * widths_[k], in, sizeof(float) * widths_[k]);
        in += widths_[k];
      }
    }
  }

 private:
  int64_t rows_, total_ = 0;
  std::vector<int64_t> widths_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_add_relu(const nn::LayerPlan& plan, int64_t batch, std::shared_ptr<const OpBuffers> relu) {
  return std::make_unique<AddReluOp>(batch * numel(plan.output_shape), std::move(relu));
}

std::unique_ptr<CpuOp> make_join(const nn::LayerPlan& plan, int64_t batch) {
  if (std::holds_alternative<nn::Add>(plan.layer)) return std::make_unique<AddOp>(batch * numel(plan.output_shape));
  // Rows: one per example and pixel; widths: each input's channels.
  const int64_t rows = batch * numel(plan.output_shape) / plan.output_shape[0];
  std::vector<int64_t> widths;
  for (const auto& s : plan.input_shapes) widths.push_back(s[0]);
  return std::make_unique<ConcatOp>(rows, std::move(widths));
}

}  // namespace convoy::cpu
