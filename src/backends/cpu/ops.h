#pragma once
// Constructors of the CPU ops, one file each; make_cpu_op picks among them.
#include "backends/cpu/cpu_op.h"

namespace convoy::cpu {

std::unique_ptr<CpuOp> make_conv2d(DnnlEnv& env, const nn::Conv2d& c, const Shape& in, const Shape& out);
std::unique_ptr<CpuOp> make_max_pool2d(DnnlEnv& env, const nn::MaxPool2d& p, const Shape& in, const Shape& out);
std::unique_ptr<CpuOp> make_relu(DnnlEnv& env, const Shape& shape);
std::unique_ptr<CpuOp> make_batch_norm(DnnlEnv& env, const nn::BatchNorm& bn, const Shape& shape);
std::unique_ptr<CpuOp> make_dense(DnnlEnv& env, const Shape& in, const Shape& out);
std::unique_ptr<CpuOp> make_log_softmax(const Shape& shape);
// Add and Concat (the functional API's joins).
std::unique_ptr<CpuOp> make_join(const nn::LayerPlan& plan, int64_t batch);

}  // namespace convoy::cpu
