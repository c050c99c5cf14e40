// Conv2d on cuDNN, NCHW, grouped (depthwise) through cuDNN's group count.
//   src [N, C, H, W], weight [O, C / groups, k, k] (PyTorch's layout), bias [O] (optional), dst [N, O, Ho, Wo]
// Padding is cuDNN's, the same on both sides: the model's (possibly uneven,
// "same") padding starts its windows at the same places whenever the output
// sizes agree, which the CUDA support check (cuda_support.cpp) made sure of.
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
  Conv2dOp(const nn::Conv2d& c, const Shape& in, const Shape& out, std::string name)
      : name_(std::move(name)), out_(out), weight_floats_(c.filters * (in[1] / c.groups) * c.kernel * c.kernel),
        bias_on_(c.bias) {
    set_nchw(x_, in[0], in[1], in[2], in[3]);
    set_nchw(y_, out[0], out[1], out[2], out[3]);
    set_nchw(bias_, 1, c.filters, 1, 1);
    CUDA_CHECK(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(c.filters),
                                          static_cast<int>(in[1] / c.groups), static_cast<int>(c.kernel),
                                          static_cast<int>(c.kernel)));
    const int pad_h = static_cast<int>(nn::window(in[2], c.kernel, c.stride, c.padding, name_).pad_begin),
              pad_w = static_cast<int>(nn::window(in[3], c.kernel, c.stride, c.padding, name_).pad_begin),
              stride = static_cast<int>(c.stride);
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

  void bind(CudaContext& ctx, const OpBuffers& b) override {
    b_ = b;
    // CUDNN_DEFAULT_MATH permits TF32 tensor cores for fp32 on Ampere and
    // later (as PyTorch's allow_tf32); CUDNN_FMA_MATH only plain fp32 FMA.
    const cudnnMathType_t math = ctx.tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    for (const ConvDesc* d : {&fwd_conv_, &bwd_data_conv_, &bwd_filter_conv_})
      CUDA_CHECK(cudnnSetConvolutionMathType(*d, math));
    const std::size_t ws = ctx.workspace_bytes;
    int max = 0, got = 0;

    CUDA_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx.cudnn, &max));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> fwd(std::max(max, 1));
    CUDA_CHECK(cudnnFindConvolutionForwardAlgorithmEx(ctx.cudnn, x_, b.src, w_, weights(), fwd_conv_, y_, b.dst, max,
                                                      &got, fwd.data(), ctx.workspace, ws));
    const auto& f = pick(fwd, got, ctx.tf32, ws, "forward convolution");
    fwd_algo_ = f.algo;
    CUDA_CHECK(cudnnSetConvolutionMathType(fwd_conv_, f.mathType));

    CUDA_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx.cudnn, &max));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> bf(std::max(max, 1));
    CUDA_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(ctx.cudnn, x_, b.src, y_, b.diff_dst, bwd_filter_conv_,
                                                             w_, weight_grads(), max, &got, bf.data(),
                                                             ctx.workspace, ws));
    const auto& g = pick(bf, got, ctx.tf32, ws, "backward-filter convolution");
    bwd_filter_algo_ = g.algo;
    CUDA_CHECK(cudnnSetConvolutionMathType(bwd_filter_conv_, g.mathType));

    if (!b.diff_src) return;
    CUDA_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx.cudnn, &max));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> bd(std::max(max, 1));
    CUDA_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(ctx.cudnn, w_, weights(), y_, b.diff_dst, bwd_data_conv_,
                                                           x_, b.diff_src, max, &got, bd.data(), ctx.workspace, ws));
    const auto& d = pick(bd, got, ctx.tf32, ws, "backward-data convolution");
    bwd_data_algo_ = d.algo;
    CUDA_CHECK(cudnnSetConvolutionMathType(bwd_data_conv_, d.mathType));
  }

  void forward(CudaContext& ctx, bool) override {
    CUDA_CHECK(cudnnConvolutionForward(ctx.cudnn, &kOne, x_, b_.src, w_, weights(), fwd_conv_, fwd_algo_,
                                       ctx.workspace, ctx.workspace_bytes, &kZero, y_, b_.dst));
    if (bias_on_) CUDA_CHECK(cudnnAddTensor(ctx.cudnn, &kOne, bias_, weights() + weight_floats_, &kOne, y_, b_.dst));
  }

  void backward(CudaContext& ctx) override {
    if (bias_on_)
      CUDA_CHECK(cudnnConvolutionBackwardBias(ctx.cudnn, &kOne, y_, b_.diff_dst, &kZero, bias_,
                                              weight_grads() + weight_floats_));
    CUDA_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn, &kOne, x_, b_.src, y_, b_.diff_dst, bwd_filter_conv_,
                                              bwd_filter_algo_, ctx.workspace, ctx.workspace_bytes, &kZero, w_,
                                              weight_grads()));
    if (b_.diff_src)
      CUDA_CHECK(cudnnConvolutionBackwardData(ctx.cudnn, &kOne, w_, weights(), y_, b_.diff_dst, bwd_data_conv_,
                                              bwd_data_algo_, ctx.workspace, ctx.workspace_bytes, &kZero, x_,
                                              b_.diff_src));
  }

 private:
  // params/grads point at this layer's weight; its bias follows it.
  float* weights() const { return b_.params; }
  float* weight_grads() const { return b_.grads; }


  std::string name_;
  Shape out_;
  int64_t weight_floats_;
  bool bias_on_;
  TensorDesc x_, y_, bias_;
  FilterDesc w_;
  ConvDesc fwd_conv_, bwd_data_conv_, bwd_filter_conv_;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CudaOp> make_conv2d(const nn::Conv2d& c, const Shape& in, const Shape& out, const std::string& name) {
  return std::make_unique<Conv2dOp>(c, in, out, name);
}

}  // namespace convoy::cuda
