// Pooling on cuDNN, NCHW: max (padding never wins), average (dividing by the
// whole window, padding included, or by the pixels inside the image, as the
// layer says) and the global average (one window the size of the image;
// [N, C, 1, 1] is the same memory as [N, C]). Stride defaults to the kernel
// size. cuDNN pads both sides alike; where that places the windows as the
// model does (the same output count), cuDNN pools. Otherwise (TensorFlow's
// "same" with an odd total) own kernels (padding_pools.cu) pool with the
// CPU's clipped windows: max keeps each output's winning position (a byte) in
// the op's own memory for backward.
//   src [N, C, H, W], dst [N, C, Ho, Wo]
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/cudnn_descriptors.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/ops.h"
#include "convoy/core/error.h"

namespace convoy::cuda {
namespace {

struct PoolWindow {
  cudnnPoolingMode_t mode;
  int kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
};

class PoolOp final : public CudaOp {
 public:
  PoolOp(const PoolWindow& p, const Shape& in, const Shape& out, const std::string& name) {
    set_nchw(x_, in[0], in[1], in[2], in[3]);
    set_nchw(y_, out[0], out[1], out.size() > 2 ? out[2] : 1, out.size() > 3 ? out[3] : 1);
    CUDA_CHECK(cudnnSetPooling2dDescriptor(pool_, p.mode, CUDNN_NOT_PROPAGATE_NAN, p.kernel_h, p.kernel_w, p.pad_h,
                                           p.pad_w, p.stride_h, p.stride_w));
    int n = 0, c = 0, h = 0, w = 0;
    CUDA_CHECK(cudnnGetPooling2dForwardOutputDim(pool_, x_, &n, &c, &h, &w));
    const int64_t oh = out.size() > 2 ? out[2] : 1, ow = out.size() > 3 ? out[3] : 1;
    if (n != out[0] || c != out[1] || h != oh || w != ow)
      throw std::logic_error("CUDA backend: " + name + ": cuDNN's output shape differs from the model's");
  }

  void bind(CudaContext&, const OpBuffers& b) override { b_ = b; }

  void forward(CudaContext& ctx, bool) override {
    CUDA_CHECK(cudnnPoolingForward(ctx.cudnn, pool_, &kOne, x_, b_.src, &kZero, y_, b_.dst));
  }

  void backward(CudaContext& ctx) override {
    if (!b_.diff_src) return;
    CUDA_CHECK(cudnnPoolingBackward(ctx.cudnn, pool_, &kOne, y_, b_.dst, y_, b_.diff_dst, x_, b_.src, &kZero, x_,
                                    b_.diff_src));
  }

 private:
  TensorDesc x_, y_;
  PoolDesc pool_;
  OpBuffers b_;
};

// Pools with the CPU's windows on own kernels, for windows cuDNN cannot place.
class WindowPoolOp final : public CudaOp {
 public:
  WindowPoolOp(bool max, const PoolArgs& p) : max_(max), p_(p) {}

  std::size_t private_bytes() const override {
    return max_ ? static_cast<std::size_t>(p_.planes * p_.oh * p_.ow) : 0;  // one byte per output
  }

  void bind(CudaContext&, const OpBuffers& b) override {
    b_ = b;
    argmax_ = static_cast<uint8_t*>(b.own);
  }

  void forward(CudaContext& ctx, bool) override {
    if (max_)
      max_pool_forward(p_, b_.src, b_.dst, argmax_, ctx.stream);
    else
      avg_pool_forward(p_, b_.src, b_.dst, ctx.stream);
  }

  void backward(CudaContext& ctx) override {
    if (!b_.diff_src) return;
    if (max_)
      max_pool_backward(p_, argmax_, b_.diff_dst, b_.diff_src, ctx.stream);
    else
      avg_pool_backward(p_, b_.diff_dst, b_.diff_src, ctx.stream);
  }

 private:
  bool max_;
  PoolArgs p_;
  uint8_t* argmax_ = nullptr;
  OpBuffers b_;
};

// True when cuDNN's symmetric padding (pad_begin on both sides) gives the
// model's output count on both axes, so its windows are the model's.
bool cudnn_places(const PoolWindow& p, const Shape& in, const Shape& out) {
  return (in[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1 == out[2] &&
         (in[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1 == out[3];
}

PoolArgs pool_args(const PoolWindow& w, const Shape& in, const Shape& out, bool count_include_pad) {
  return {.planes = in[0] * in[1], .h = in[2], .w = in[3], .oh = out[2], .ow = out[3], .k = w.kernel_h,
          .s = w.stride_h, .top = w.pad_h, .left = w.pad_w, .count_include_pad = count_include_pad};
}

PoolWindow window_of(cudnnPoolingMode_t mode, int64_t kernel, int64_t stride, int64_t padding, const Shape& in,
                     const std::string& name) {
  const int64_t s = stride ? stride : kernel;
  return {mode,
          static_cast<int>(kernel),
          static_cast<int>(kernel),
          static_cast<int>(s),
          static_cast<int>(s),
          static_cast<int>(nn::window(in[2], kernel, s, padding, name).pad_begin),
          static_cast<int>(nn::window(in[3], kernel, s, padding, name).pad_begin)};
}

}  // namespace

std::unique_ptr<CudaOp> make_max_pool2d(const nn::MaxPool2d& p, const Shape& in, const Shape& out,
                                        const std::string& name) {
  const PoolWindow w = window_of(CUDNN_POOLING_MAX, p.kernel, p.stride, p.padding, in, name);
  if (cudnn_places(w, in, out)) return std::make_unique<PoolOp>(w, in, out, name);
  // The winning position is a byte, as on the CPU (which has the same limit).
  require(p.kernel <= nn::kMaxPoolLargestKernel, name + ": max-pool kernel sizes above 16 are not supported");
  return std::make_unique<WindowPoolOp>(true, pool_args(w, in, out, true));
}

std::unique_ptr<CudaOp> make_avg_pool2d(const nn::AvgPool2d& p, const Shape& in, const Shape& out,
                                        const std::string& name) {
  const cudnnPoolingMode_t mode =
      p.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  const PoolWindow w = window_of(mode, p.kernel, p.stride, p.padding, in, name);
  if (!cudnn_places(w, in, out))
    return std::make_unique<WindowPoolOp>(false, pool_args(w, in, out, p.count_include_pad));
  return std::make_unique<PoolOp>(w, in, out, name);
}

std::unique_ptr<CudaOp> make_global_avg_pool(const Shape& in, const Shape& out, const std::string& name) {
  const int h = static_cast<int>(in[2]), w = static_cast<int>(in[3]);
  return std::make_unique<PoolOp>(PoolWindow{CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, h, w, h, w, 0, 0}, in, out,
                                  name);
}

}  // namespace convoy::cuda
