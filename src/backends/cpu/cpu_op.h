#pragma once
// One layer's kernels on the CPU (the op contract: backends/op.h): the
// constructor describes and creates its oneDNN primitives for the fixed
// batch, bind() wires them to planned memory, forward()/backward() execute.
#include <cstddef>
#include <memory>
#include <vector>

#include "backends/cpu/dnnl_env.h"
#include "backends/op.h"
#include "convoy/backends/executable.h"
#include "convoy/nn/layers.h"

namespace convoy::cpu {

using convoy::OpBuffers;
using CpuOp = Op<DnnlEnv>;

// seed: this layer's own (dropout masks); algo: convolutions' (CompileOptions::conv_algo).
std::unique_ptr<CpuOp> make_cpu_op(DnnlEnv& env, const nn::LayerPlan& plan, int64_t batch, uint64_t seed,
                                   ConvAlgo algo = ConvAlgo::automatic);

// Input/output shapes of a layer with the batch dimension in front.
Shape with_batch(int64_t batch, const Shape& shape);

}  // namespace convoy::cpu
