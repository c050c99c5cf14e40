#pragma once
// Constructors of the CUDA ops; make_cuda_op (cuda_op.cpp) picks among them.
// Shapes include the batch.
#include <string>

#include "backends/cuda/cuda_op.h"

namespace convoy::cuda {

// trainable false: a frozen layer (see make_cuda_op).
std::unique_ptr<CudaOp> make_conv2d(const nn::Conv2d& c, const Shape& in, const Shape& out, const std::string& name,
                                    bool trainable);
// Pools whose windows cuDNN's symmetric padding places run on cuDNN, the
// others (uneven "same" padding) on own kernels.
std::unique_ptr<CudaOp> make_max_pool2d(const nn::MaxPool2d& p, const Shape& in, const Shape& out,
                                        const std::string& name);
std::unique_ptr<CudaOp> make_avg_pool2d(const nn::AvgPool2d& p, const Shape& in, const Shape& out,
                                        const std::string& name);
std::unique_ptr<CudaOp> make_global_avg_pool(const Shape& in, const Shape& out, const std::string& name);
std::unique_ptr<CudaOp> make_activation(const nn::Layer& layer, int64_t elements);  // ReLU6, SiLU, sigmoid
std::unique_ptr<CudaOp> make_batch_norm(const nn::BatchNorm& bn, const Shape& in, bool trainable);
std::unique_ptr<CudaOp> make_dense(int64_t batch, int64_t in, int64_t out, bool trainable);
std::unique_ptr<CudaOp> make_relu(int64_t elements);
std::unique_ptr<CudaOp> make_log_softmax(int64_t rows, int64_t cols);
std::unique_ptr<CudaOp> make_flatten();
std::unique_ptr<CudaOp> make_join(const nn::LayerPlan& plan, int64_t batch);
std::unique_ptr<CudaOp> make_dropout(const nn::Dropout& d, const Shape& in, uint64_t seed);
std::unique_ptr<CudaOp> make_multiply(const nn::LayerPlan& plan, int64_t batch);

}  // namespace convoy::cuda
