// Max-pool on cuDNN, NCHW, no padding; stride defaults to the kernel size.
//   src [N, C, H, W], dst [N, C, Ho, Wo]
#include <stdexcept>
#include <string>

#include "backends/cuda/cuda_op.h"
#include "backends/cuda/cudnn_descriptors.h"

namespace convoy::cuda {
namespace {

class MaxPool2dOp final : public CudaOp {
 public:
  MaxPool2dOp(const nn::MaxPool2d& p, const Shape& in, const Shape& out, const std::string& name) {
    set_nchw(x_, in[0], in[1], in[2], in[3]);
    set_nchw(y_, out[0], out[1], out[2], out[3]);
    const int k = static_cast<int>(p.kernel), s = static_cast<int>(p.stride ? p.stride : p.kernel);
    CUDA_CHECK(cudnnSetPooling2dDescriptor(pool_, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, k, k, 0, 0, s, s));
    int n = 0, c = 0, h = 0, w = 0;
    CUDA_CHECK(cudnnGetPooling2dForwardOutputDim(pool_, x_, &n, &c, &h, &w));
    if (n != out[0] || c != out[1] || h != out[2] || w != out[3])
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

}  // namespace

std::unique_ptr<CudaOp> make_max_pool2d(const nn::MaxPool2d& p, const Shape& in, const Shape& out,
                                        const std::string& name) {
  return std::make_unique<MaxPool2dOp>(p, in, out, name);
}

}  // namespace convoy::cuda
