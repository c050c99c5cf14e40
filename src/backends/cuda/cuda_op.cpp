#include "backends/cuda/cuda_op.h"

#include <stdexcept>

#include "backends/cuda/ops.h"

namespace convoy::cuda {

std::unique_ptr<CudaOp> make_cuda_op(const nn::LayerPlan& plan, int64_t batch, uint64_t seed) {
  Shape in{batch}, out{batch};
  in.insert(in.end(), plan.input_shape.begin(), plan.input_shape.end());
  out.insert(out.end(), plan.output_shape.begin(), plan.output_shape.end());
  const nn::Layer& layer = plan.layer;
  if (auto* c = std::get_if<nn::Conv2d>(&layer)) return make_conv2d(*c, in, out, plan.name, plan.trainable);
  if (auto* p = std::get_if<nn::MaxPool2d>(&layer)) return make_max_pool2d(*p, in, out, plan.name);
  if (auto* p = std::get_if<nn::AvgPool2d>(&layer)) return make_avg_pool2d(*p, in, out, plan.name);
  if (std::holds_alternative<nn::GlobalAvgPool>(layer)) return make_global_avg_pool(in, out, plan.name);
  if (std::holds_alternative<nn::ReLU>(layer)) return make_relu(numel(in));
  if (std::holds_alternative<nn::ReLU6>(layer) || std::holds_alternative<nn::SiLU>(layer) ||
      std::holds_alternative<nn::Sigmoid>(layer))
    return make_activation(layer, numel(in));
  if (auto* b = std::get_if<nn::BatchNorm>(&layer)) return make_batch_norm(*b, in, plan.trainable);
  if (std::holds_alternative<nn::Flatten>(layer)) return make_flatten();
  if (std::holds_alternative<nn::Dense>(layer))
    return make_dense(batch, numel(plan.input_shape), out[1], plan.trainable);
  if (auto* d = std::get_if<nn::Dropout>(&layer)) return make_dropout(*d, in, seed);
  if (std::holds_alternative<nn::Multiply>(layer)) return make_multiply(plan, batch);
  if (std::holds_alternative<nn::LogSoftmax>(layer)) return make_log_softmax(batch, out[1]);
  if (nn::arity(layer) == nn::kManyInputs) return make_join(plan, batch);
  // A new layer kind without a CUDA kernel (cuda_unsupported names it first).
  throw std::logic_error("CUDA backend has no kernel for layer " + plan.name);
}

}  // namespace convoy::cuda
