// Conv2d on cuDNN, NCHW, grouped (depthwise) through cuDNN's group count.
//   src [N, C, H, W], weight [O, C / groups, k, k] (PyTorch's layout), bias [O] (optional), dst [N, O, Ho, Wo]
// Padding: cuDNN pads both sides of an axis alike. Its windows start where
// the model's do (at -pad_begin), so whenever it counts as many outputs as the
// model, cuDNN pads. Otherwise (TensorFlow's "same" with an odd total, one
// more row or column at the end) the input is padded explicitly into the op's
// own memory and cuDNN convolves that without padding; backward computes the
// weight gradient from the same padded input, then the input gradient of the
// padded image into that buffer, and crops it.
// A frozen layer (trainable = false) computes no weight or bias gradient:
// they stay zero, as on the CPU. Only its input gradient flows.
// Algorithms are picked once, at bind, by timing every candidate on the real
// buffers (cudnnFind*Ex), limited to the shared workspace. With TF32 off the
// convolutions use plain fp32 FMA kernels only (CUDNN_FMA_MATH); on, cuDNN may
// use TF32 tensor cores (and picks them when they are faster). Each direction has its own descriptor because the
// chosen algorithm fixes the descriptor's math type.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/cudnn_descriptors.h"
#include "backends/cuda/kernels.h"

namespace convoy::cuda {
namespace {

template <class Perf>
const Perf& pick(const std::vector<Perf>& found, int count, bool tf32, std::size_t workspace, const char* what) {
  for (int i = 0; i < count; ++i) {  // cuDNN sorts them fastest first
    const Perf& p = found[i];
    if (p.status == CUDNN_STATUS_SUCCESS && p.memory <= workspace && (tf32 || p.mathType == CUDNN_FMA_MATH)) return p;
  }
  throw std::runtime_error(std::string("CUDA backend: cuDNN offered no usable ") + what + " algorithm (" +
                           std::to_string(count) + " candidates, workspace " + std::to_string(workspace) +
                           " bytes, tf32 " + (tf32 ? "on" : "off") + ")");
}

class Conv2dOp final : public CudaOp {
 public:
  Conv2dOp(const nn::Conv2d& c, const Shape& in, const Shape& out, std::string name, bool trainable)
      : name_(std::move(name)), out_(out), weight_floats_(c.filters * (in[1] / c.groups) * c.kernel * c.kernel),
        bias_on_(c.bias), trainable_(trainable), batch_(in[0]), channels_(in[1]), height_(in[2]), width_(in[3]) {
    const nn::Window wh = nn::window(in[2], c.kernel, c.stride, c.padding, name_),
                     ww = nn::window(in[3], c.kernel, c.stride, c.padding, name_);
    const auto symmetric_out = [&](int64_t size, const nn::Window& w) {
      return (size + 2 * w.pad_begin - c.kernel) / c.stride + 1;
    };
    padded_ = symmetric_out(in[2], wh) != out[2] || symmetric_out(in[3], ww) != out[3];
    int pad_h = static_cast<int>(wh.pad_begin), pad_w = static_cast<int>(ww.pad_begin);
    if (padded_) {
      top_ = wh.pad_begin;
      left_ = ww.pad_begin;
      padded_h_ = in[2] + wh.pad_begin + wh.pad_end;
      padded_w_ = in[3] + ww.pad_begin + ww.pad_end;
      pad_h = pad_w = 0;
      set_nchw(x_, in[0], in[1], padded_h_, padded_w_);
    } else {
      set_nchw(x_, in[0], in[1], in[2], in[3]);
    }
    set_nchw(y_, out[0], out[1], out[2], out[3]);
    set_nchw(bias_, 1, c.filters, 1, 1);
    CUDA_CHECK(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(c.filters),
                                          static_cast<int>(in[1] / c.groups), static_cast<int>(c.kernel),
                                          static_cast<int>(c.kernel)));
    const int stride = static_cast<int>(c.stride);
    for (const ConvDesc* d : {&fwd_conv_, &bwd_data_conv_, &bwd_filter_conv_}) {
      CUDA_CHECK(cudnnSetConvolution2dDescriptor(*d, pad_h, pad_w, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                 CUDNN_DATA_FLOAT));
      CUDA_CHECK(cudnnSetConvolutionGroupCount(*d, static_cast<int>(c.groups)));
    }
    int n = 0, ch = 0, h = 0, w = 0;
    CUDA_CHECK(cudnnGetConvolution2dForwardOutputDim(fwd_conv_, x_, w_, &n, &ch, &h, &w));
    if (n != out[0] || ch != out[1] || h != out[2] || w != out[3])
      throw std::logic_error("CUDA backend: " + name_ + ": cuDNN's output shape differs from the model's");
  }

  // The padded input (and, in backward, the padded input's gradient).
  std::size_t private_bytes() const override {
    return padded_ ? sizeof(float) * static_cast<std::size_t>(batch_ * channels_ * padded_h_ * padded_w_) : 0;
  }

  void bind(CudaContext& ctx, const OpBuffers& b) override {
    b_ = b;
    padded_x_ = padded_ ? static_cast<float*>(b.own) : nullptr;
    if (!trainable_)
      CUDA_CHECK(cudaMemsetAsync(b.grads, 0, sizeof(float) * (weight_floats_ + (bias_on_ ? out_[1] : 0)), ctx.stream));
    // CUDNN_DEFAULT_MATH permits TF32 tensor cores for fp32 on Ampere and
    // later (as PyTorch's allow_tf32); CUDNN_FMA_MATH only plain fp32 FMA.
    const cudnnMathType_t math = ctx.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    for (const ConvDesc* d : {&fwd_conv_, &bwd_data_conv_, &bwd_filter_conv_})
      CUDA_CHECK(cudnnSetConvolutionMathType(*d, math));
    const std::size_t ws = ctx.workspace_bytes;
    int max = 0, got = 0;

    CUDA_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx.cudnn, &max));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(std::max(max, 1));
    CUDA_CHECK(cudnnFindConvolutionForwardAlgorithmEx(ctx.cudnn, x_, x(), w_, weights(), fwd_conv_, y_, b.dst, max,
                                                      &got, fwd.data(), ctx.workspace, ws));
    const auto& f = pick(fwd, got, ctx.tf32, ws, "forward convolution");
    fwd_algo_ = f.algo;
    CUDA_CHECK(cudnnSetConvolutionMathType(fwd_conv_, f.mathType));

    if (trainable_) {
      CUDA_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx.cudnn, &max));
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bf(std::max(max, 1));
      CUDA_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(ctx.cudnn, x_, x(), y_, b.diff_dst, bwd_filter_conv_,
                                                               w_, weight_grads(), max, &got, bf.data(),
                                                               ctx.workspace, ws));
      const auto& g = pick(bf, got, ctx.tf32, ws, "backward-filter convolution");
      bwd_filter_algo_ = g.algo;
      CUDA_CHECK(cudnnSetConvolutionMathType(bwd_filter_conv_, g.mathType));
      // The search wrote into the gradient buffer; a step overwrites it anyway.
    }

    if (!b.diff_src) return;
    CUDA_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx.cudnn, &max));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bd(std::max(max, 1));
    CUDA_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(ctx.cudnn, w_, weights(), y_, b.diff_dst, bwd_data_conv_,
                                                           x_, dx(), max, &got, bd.data(), ctx.workspace, ws));
    const auto& d = pick(bd, got, ctx.tf32, ws, "backward-data convolution");
    bwd_data_algo_ = d.algo;
    CUDA_CHECK(cudnnSetConvolutionMathType(bwd_data_conv_, d.mathType));
  }

  void forward(CudaContext& ctx, bool) override {
    if (padded_) pad_planes(b_.src, padded_x_, batch_ * channels_, height_, width_, top_, left_, padded_h_, padded_w_,
                          ctx.stream);
    CUDA_CHECK(cudnnConvolutionForward(ctx.cudnn, &kOne, x_, x(), w_, weights(), fwd_conv_, fwd_algo_, ctx.workspace,
                                       ctx.workspace_bytes, &kZero, y_, b_.dst));
    if (bias_on_) CUDA_CHECK(cudnnAddTensor(ctx.cudnn, &kOne, bias_, weights() + weight_floats_, &kOne, y_, b_.dst));
  }

  // The weight gradient first: in padded mode it reads the padded input,
  // which the input gradient then overwrites.
  void backward(CudaContext& ctx) override {
    if (trainable_) {
      if (bias_on_)
        CUDA_CHECK(cudnnConvolutionBackwardBias(ctx.cudnn, &kOne, y_, b_.diff_dst, &kZero, bias_,
                                                weight_grads() + weight_floats_));
      CUDA_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn, &kOne, x_, x(), y_, b_.diff_dst, bwd_filter_conv_,
                                                bwd_filter_algo_, ctx.workspace, ctx.workspace_bytes, &kZero, w_,
                                                weight_grads()));
    }
    if (!b_.diff_src) return;
    CUDA_CHECK(cudnnConvolutionBackwardData(ctx.cudnn, &kOne, w_, weights(), y_, b_.diff_dst, bwd_data_conv_,
                                            bwd_data_algo_, ctx.workspace, ctx.workspace_bytes, &kZero, x_, dx()));
    if (padded_)
      crop_planes(padded_x_, b_.diff_src, batch_ * channels_, height_, width_, top_, left_, padded_h_, padded_w_,
                  ctx.stream);
  }

 private:
  // params/grads point at this layer's weight; its bias follows it.
  float* weights() const { return b_.params; }
  float* weight_grads() const { return b_.grads; }
  // What cuDNN reads as the input and writes as its gradient: the padded
  // buffer in padded mode.
  const float* x() const { return padded_ ? padded_x_ : b_.src; }
  float* dx() const { return padded_ ? padded_x_ : b_.diff_src; }

  std::string name_;
  Shape out_;
  int64_t weight_floats_;
  bool bias_on_, trainable_;
  int64_t batch_, channels_, height_, width_;  // the input's
  bool padded_ = false;  // explicit padding (uneven "same")
  int64_t top_ = 0, left_ = 0, padded_h_ = 0, padded_w_ = 0;
  float* padded_x_ = nullptr;
  TensorDesc x_, y_, bias_;
  FilterDesc w_;
  ConvDesc fwd_conv_, bwd_data_conv_, bwd_filter_conv_;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CudaOp> make_conv2d(const nn::Conv2d& c, const Shape& in, const Shape& out, const std::string& name,
                                    bool trainable) {
  return std::make_unique<Conv2dOp>(c, in, out, name, trainable);
}

}  // namespace convoy::cuda
