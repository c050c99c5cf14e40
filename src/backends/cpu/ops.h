#pragma once
// Constructors of the CPU ops, one file each; make_cpu_op picks among them.
// in/out are the layer's shapes with the batch in front.
#include <memory>

#include "backends/cpu/cpu_op.h"
#include "backends/cpu/planar_conv.h"

namespace convoy::cpu {

// Where a Conv2d layer's windows fall (padding resolved).
ConvGeometry conv_geometry(const nn::LayerPlan& plan, const Shape& in, const Shape& out);
std::unique_ptr<CpuOp> make_conv2d(DnnlEnv& env, const nn::LayerPlan& plan, const Shape& in, const Shape& out,
                                   ConvAlgo algo);
// relu: a ReLU fused after the pool, its only reader (conv_pool_op.h), as make_batch_norm's.
std::unique_ptr<CpuOp> make_max_pool2d(const nn::LayerPlan& plan, const Shape& in, const Shape& out,
                                       std::shared_ptr<const OpBuffers> relu = nullptr);
std::unique_ptr<CpuOp> make_avg_pool2d(const nn::LayerPlan& plan, const Shape& in, const Shape& out);
std::unique_ptr<CpuOp> make_global_avg_pool(const Shape& in);
std::unique_ptr<CpuOp> make_dropout(const nn::LayerPlan& plan, int64_t batch, uint64_t seed);
// ReLU, ReLU6, SiLU, Sigmoid.
std::unique_ptr<CpuOp> make_eltwise(DnnlEnv& env, const nn::Layer& layer, const Shape& shape);
// relu: a ReLU fused into it, its only reader (conv_pool_op.h): the ReLU's
// buffers, filled in when the ReLU's op (a FusedAwayOp) is bound.
std::unique_ptr<CpuOp> make_batch_norm(const nn::LayerPlan& plan, const Shape& shape,
                                       std::shared_ptr<const OpBuffers> relu = nullptr);
// A batch norm running the ReLU after it and the max pool after that
// (batch_norm_op.cpp): pool_plan and pooled (its output shape, batch in
// front) describe the pool; relu and pool: the buffers of the two fused
// layers, filled in when their ops (FusedAwayOps) are bound.
std::unique_ptr<CpuOp> make_batch_norm_relu_pool(const nn::LayerPlan& plan, const Shape& shape,
                                                 std::shared_ptr<const OpBuffers> relu,
                                                 const nn::LayerPlan& pool_plan, const Shape& pooled,
                                                 std::shared_ptr<const OpBuffers> pool);
// A batch norm over images ([N, C, H, W]) running the flatten after it, its
// only reader (batch_norm_op.cpp): flat is the flatten's buffers, filled in
// when its op (a FusedAwayOp) is bound.
std::unique_ptr<CpuOp> make_batch_norm_flatten(const nn::LayerPlan& plan, const Shape& shape,
                                               std::shared_ptr<const OpBuffers> flat);
std::unique_ptr<CpuOp> make_dense(DnnlEnv& env, const nn::LayerPlan& plan, const Shape& in, const Shape& out);
std::unique_ptr<CpuOp> make_log_softmax(const Shape& shape);
// Add and Concat (the functional API's joins).
std::unique_ptr<CpuOp> make_join(const nn::LayerPlan& plan, int64_t batch);
// A two-input Add with its only reader, a ReLU, fused (as make_batch_norm's relu).
std::unique_ptr<CpuOp> make_add_relu(const nn::LayerPlan& plan, int64_t batch, std::shared_ptr<const OpBuffers> relu);
std::unique_ptr<CpuOp> make_multiply(const nn::LayerPlan& plan, int64_t batch);
std::unique_ptr<CpuOp> make_clip(const nn::LayerPlan& plan, int64_t batch);
std::unique_ptr<CpuOp> make_affine(const nn::LayerPlan& plan, int64_t batch);

}  // namespace convoy::cpu
