// Dropout and multiply (squeeze-and-excitation gates) on own kernels
// (gates.cu), with the CPU backend's semantics (backends/cpu/dropout_op.cpp,
// multiply_op.cpp):
//   dropout, training: dst = src * mask with the CPU's mask for this layer,
//     step and example (dropout_mask.h); diff_src = diff_dst * mask, the mask
//     drawn again rather than stored. Inference (or rate 0): a copy.
//   multiply: dst = x * g with g of x's shape (element-wise) or one value per
//     example and channel ([C] or [C, 1, 1] for an image x: in NCHW each
//     channel's pixels are one contiguous row); diff_x = diff_dst * g,
//     diff_g = diff_dst * x summed over the row.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/ops.h"

namespace convoy::cuda {
namespace {

class DropoutOp final : public CudaOp {
 public:
  DropoutOp(float rate, const Shape& in, uint64_t seed) {
    a_.seed = seed;
    a_.rate = rate;
    a_.keep_scale = 1.0f / (1.0f - rate);  // as the CPU's, in float
    a_.batch = in[0];
    a_.example = numel(in) / in[0];
    // The CPU keeps images NHWC: an image's channels are its innermost axis there.
    a_.channels = in.size() == 4 ? in[1] : a_.example;
    a_.pixels = in.size() == 4 ? in[2] * in[3] : 1;
  }

  void bind(CudaContext&, const OpBuffers& b) override {
    b_ = b;
    a_.steps_done = b.steps_done;
  }

  void forward(CudaContext& ctx, bool training) override {
    if (!training || a_.rate == 0) {
      CUDA_CHECK(cudaMemcpyAsync(b_.dst, b_.src, bytes(), cudaMemcpyDeviceToDevice, ctx.stream));
      return;
    }
    dropout_forward(a_, b_.src, b_.dst, ctx.stream);
  }

  void backward(CudaContext& ctx) override {
    if (!b_.diff_src) return;
    if (a_.rate == 0) {
      CUDA_CHECK(cudaMemcpyAsync(b_.diff_src, b_.diff_dst, bytes(), cudaMemcpyDeviceToDevice, ctx.stream));
      return;
    }
    dropout_backward(a_, b_.diff_dst, b_.diff_src, ctx.stream);
  }

 private:
  std::size_t bytes() const { return sizeof(float) * static_cast<std::size_t>(a_.batch * a_.example); }

  DropoutArgs a_;
  OpBuffers b_;
};

class MultiplyOp final : public CudaOp {
 public:
  MultiplyOp(int64_t gates, int64_t pixels) : gates_(gates), pixels_(pixels) {}

  void bind(CudaContext&, const OpBuffers& b) override { b_ = b; }

  void forward(CudaContext& ctx, bool) override {
    gate_forward(b_.srcs[0], b_.srcs[1], b_.dst, gates_, pixels_, ctx.stream);
  }

  void backward(CudaContext& ctx) override {
    gate_backward(b_.srcs[0], b_.srcs[1], b_.diff_dst, b_.diff_srcs[0], b_.diff_srcs[1], gates_, pixels_,
                  ctx.stream);
  }

 private:
  int64_t gates_, pixels_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CudaOp> make_dropout(const nn::Dropout& d, const Shape& in, uint64_t seed) {
  return std::make_unique<DropoutOp>(d.rate, in, seed);
}

std::unique_ptr<CudaOp> make_multiply(const nn::LayerPlan& plan, int64_t batch) {
  const Shape& x = plan.input_shapes[0];
  if (plan.input_shapes[1] == x) return std::make_unique<MultiplyOp>(batch * numel(x), 1);
  return std::make_unique<MultiplyOp>(batch * x[0], numel(x) / x[0]);
}

}  // namespace convoy::cuda
