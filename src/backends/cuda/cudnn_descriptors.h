#pragma once
// Owners of cuDNN descriptors: created checked, destroyed with their op.
#include <cudnn.h>

#include <cstdint>

#include "backends/cuda/cuda_check.h"

namespace convoy::cuda {

template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class Descriptor {
 public:
  Descriptor() { CUDA_CHECK(Create(&d_)); }
  ~Descriptor() { Destroy(d_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  T get() const { return d_; }
  operator T() const { return d_; }  // NOLINT: passed straight to cuDNN calls

 private:
  T d_{};
};

using TensorDesc = Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;

// A float NCHW tensor; [N, F] vectors are [N, F, 1, 1].
inline void set_nchw(const TensorDesc& d, int64_t n, int64_t c, int64_t h, int64_t w) {
  CUDA_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                        static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)));
}

// cuDNN's blend factors (y = alpha * result + beta * y).
inline constexpr float kOne = 1.0f, kZero = 0.0f;

}  // namespace convoy::cuda
