// The layers that need no library: ReLU, ReLU6, SiLU, sigmoid, log-softmax, Flatten (a view in
// NCHW), and the functional API's joins. In NCHW a join works per example:
// each input is one contiguous block of C_k*H*W floats per example.
//   add:    dst = sum_k src_k;                  diff_src_k = diff_dst
//   concat: dst[n] = [src_0[n], src_1[n], ...];  diff_src_k = its slice of diff_dst
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/ops.h"

namespace convoy::cuda {
namespace {

class ReluOp final : public CudaOp {
 public:
  explicit ReluOp(int64_t elements) : n_(elements) {}
  void bind(CudaContext&, const OpBuffers& b) override { b_ = b; }
  void forward(CudaContext& ctx, bool) override { relu_forward(b_.src, b_.dst, n_, ctx.stream); }
  void backward(CudaContext& ctx) override {
    if (b_.diff_src) relu_backward(b_.src, b_.diff_dst, b_.diff_src, n_, ctx.stream);
  }

 private:
  int64_t n_;
  OpBuffers b_;
};

class ActivationOp final : public CudaOp {
 public:
  ActivationOp(Activation a, int64_t elements) : a_(a), n_(elements) {}
  void bind(CudaContext&, const OpBuffers& b) override { b_ = b; }
  void forward(CudaContext& ctx, bool) override { activation_forward(a_, b_.src, b_.dst, n_, ctx.stream); }
  void backward(CudaContext& ctx) override {
    if (b_.diff_src) activation_backward(a_, b_.src, b_.diff_dst, b_.diff_src, n_, ctx.stream);
  }

 private:
  Activation a_;
  int64_t n_;
  OpBuffers b_;
};

class LogSoftmaxOp final : public CudaOp {
 public:
  LogSoftmaxOp(int64_t rows, int64_t cols) : rows_(rows), cols_(cols) {}
  void bind(CudaContext&, const OpBuffers& b) override { b_ = b; }
  void forward(CudaContext& ctx, bool) override { log_softmax_forward(b_.src, b_.dst, rows_, cols_, ctx.stream); }
  void backward(CudaContext& ctx) override {
    if (b_.diff_src) log_softmax_backward(b_.dst, b_.diff_dst, b_.diff_src, rows_, cols_, ctx.stream);
  }

 private:
  int64_t rows_, cols_;
  OpBuffers b_;
};

class FlattenOp final : public CudaOp {
 public:
  bool is_view() const override { return true; }
  void bind(CudaContext&, const OpBuffers&) override {}
  void forward(CudaContext&, bool) override {}
  void backward(CudaContext&) override {}
};

class AddOp final : public CudaOp {
 public:
  explicit AddOp(int64_t elements) : n_(elements) {}
  void bind(CudaContext&, const OpBuffers& b) override { b_ = b; }
  void forward(CudaContext& ctx, bool) override {
    add(b_.srcs[0], b_.srcs[1], b_.dst, n_, ctx.stream);
    for (std::size_t k = 2; k < b_.srcs.size(); ++k) accumulate(b_.dst, b_.srcs[k], n_, ctx.stream);
  }
  void backward(CudaContext& ctx) override {
    for (float* d : b_.diff_srcs)
      if (d) CUDA_CHECK(cudaMemcpyAsync(d, b_.diff_dst, sizeof(float) * n_, cudaMemcpyDeviceToDevice, ctx.stream));
  }

 private:
  int64_t n_;
  OpBuffers b_;
};

class ConcatOp final : public CudaOp {
 public:
  ConcatOp(int64_t batch, std::vector<int64_t> widths) : batch_(batch), widths_(std::move(widths)) {
    for (int64_t w : widths_) total_ += w;
  }
  void bind(CudaContext&, const OpBuffers& b) override { b_ = b; }
  // One strided copy per input: `batch` rows of its width, into its columns.
  void forward(CudaContext& ctx, bool) override {
    int64_t column = 0;
    for (std::size_t k = 0; k < widths_.size(); ++k) {
      CUDA_CHECK(cudaMemcpy2DAsync(b_.dst + column, bytes(total_), b_.srcs[k], bytes(widths_[k]), bytes(widths_[k]),
                                   batch_, cudaMemcpyDeviceToDevice, ctx.stream));
      column += widths_[k];
    }
  }
  void backward(CudaContext& ctx) override {
    int64_t column = 0;
    for (std::size_t k = 0; k < widths_.size(); ++k) {
      if (b_.diff_srcs[k])
        CUDA_CHECK(cudaMemcpy2DAsync(b_.diff_srcs[k], bytes(widths_[k]), b_.diff_dst + column, bytes(total_),
                                     bytes(widths_[k]), batch_, cudaMemcpyDeviceToDevice, ctx.stream));
      column += widths_[k];
    }
  }

 private:
  static std::size_t bytes(int64_t floats) { return sizeof(float) * static_cast<std::size_t>(floats); }
  int64_t batch_, total_ = 0;
  std::vector<int64_t> widths_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CudaOp> make_relu(int64_t elements) { return std::make_unique<ReluOp>(elements); }
std::unique_ptr<CudaOp> make_activation(const nn::Layer& layer, int64_t elements) {
  const Activation a = std::holds_alternative<nn::ReLU6>(layer) ? Activation::relu6
                       : std::holds_alternative<nn::SiLU>(layer) ? Activation::silu
                                                                  : Activation::sigmoid;
  return std::make_unique<ActivationOp>(a, elements);
}
std::unique_ptr<CudaOp> make_log_softmax(int64_t rows, int64_t cols) {
  return std::make_unique<LogSoftmaxOp>(rows, cols);
}
std::unique_ptr<CudaOp> make_flatten() { return std::make_unique<FlattenOp>(); }
std::unique_ptr<CudaOp> make_join(const nn::LayerPlan& plan, int64_t batch) {
  if (std::holds_alternative<nn::Add>(plan.layer)) return std::make_unique<AddOp>(batch * numel(plan.output_shape));
  std::vector<int64_t> widths;
  for (const auto& s : plan.input_shapes) widths.push_back(numel(s));
  return std::make_unique<ConcatOp>(batch, std::move(widths));
}

}  // namespace convoy::cuda
