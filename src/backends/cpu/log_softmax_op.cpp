// LogSoftmax over the feature axis of [N, C]: own kernels (see softmax_kernels).
#include "backends/cpu/ops.h"
#include "backends/cpu/softmax_kernels.h"

namespace convoy::cpu {
namespace {

class LogSoftmaxOp final : public CpuOp {
 public:
  explicit LogSoftmaxOp(const Shape& shape) : rows_(shape[0]), cols_(shape[1]) {}
  void bind(DnnlEnv&, const OpBuffers& b) override { b_ = b; }
  void forward(DnnlEnv&, bool) override { log_softmax_forward(b_.src, b_.dst, rows_, cols_); }
  void backward(DnnlEnv&) override {
    if (b_.diff_src) log_softmax_backward(b_.dst, b_.diff_dst, b_.diff_src, rows_, cols_);
  }

 private:
  int64_t rows_, cols_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_log_softmax(const Shape& shape) { return std::make_unique<LogSoftmaxOp>(shape); }

}  // namespace convoy::cpu
