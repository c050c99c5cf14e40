// Dense on cuBLAS. Row-major PyTorch tensors seen column-major by cuBLAS:
//   x [N, K], weight [O, K], bias [O], y [N, O] = x W^T + b
//   forward:  y^T [O, N] = W [O, K] . x^T [K, N]   -> gemm(T, N)
//   dW [O, K]:  dW^T [K, O] = x^T [K, N] . dy [N, O] -> gemm(N, T)
//   dx [N, K]:  dx^T [K, N] = W^T [K, O] . dy^T [O, N] -> gemm(N, N)
//   db [O] = column sums of dy (own kernel, a fixed order)
// A frozen layer (trainable = false) computes neither dW nor db: they stay zero.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/kernels.h"

namespace convoy::cuda {
namespace {

class DenseOp final : public CudaOp {
 public:
  DenseOp(int64_t batch, int64_t in, int64_t out, bool trainable)
      : n_(static_cast<int>(batch)), k_(static_cast<int>(in)), o_(static_cast<int>(out)), trainable_(trainable) {}

  void bind(CudaContext& ctx, const OpBuffers& b) override {
    b_ = b;
    if (!trainable_)
      CUDA_CHECK(cudaMemsetAsync(b.grads, 0, sizeof(float) * (int64_t{o_} * k_ + o_), ctx.stream));
  }

  void forward(CudaContext& ctx, bool) override {
    const float one = 1, zero = 0;
    CUDA_CHECK(cublasSgemm(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, o_, n_, k_, &one, b_.params, k_, b_.src, k_, &zero,
                           b_.dst, o_));
    add_bias_rows(b_.dst, b_.params + int64_t{o_} * k_, n_, o_, ctx.stream);
  }

  void backward(CudaContext& ctx) override {
    const float one = 1, zero = 0;
    if (trainable_) {
      CUDA_CHECK(cublasSgemm(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_T, k_, o_, n_, &one, b_.src, k_, b_.diff_dst, o_,
                             &zero, b_.grads, k_));
      column_sums(b_.diff_dst, b_.grads + int64_t{o_} * k_, n_, o_, ctx.stream);
    }
    if (b_.diff_src)
      CUDA_CHECK(cublasSgemm(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, k_, n_, o_, &one, b_.params, k_, b_.diff_dst, o_,
                             &zero, b_.diff_src, k_));
  }

 private:
  int n_, k_, o_;
  bool trainable_;
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CudaOp> make_dense(int64_t batch, int64_t in, int64_t out, bool trainable) {
  return std::make_unique<DenseOp>(batch, in, out, trainable);
}

}  // namespace convoy::cuda
