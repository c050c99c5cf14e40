#pragma once
// A model's ops on the CPU device (backends/device.h, make_ops): one per
// layer, as make_cpu_op makes them, except where a first block runs fused.
//
// The fused first block: a convolution of the model's input that our planar
// kernels run both ways (planar_conv.h), whose only reader is a 2×2 stride-2
// max pool without padding, and, when the pool's only reader is a ReLU, that
// ReLU. The convolution's op takes the pool's max (and the ReLU) on each
// band of its output planes and writes only the pooled (ReLU'd) NHWC output
// and the window positions; its backward pass builds its planar output
// gradient from the pooled gradient and the positions. The full conv output
// and its gradient (2.9 MB each for the seed CNN at batch 128) are never
// written and the pool's and ReLU's own passes are no-ops: their work, and
// its time in `--profile`, is in the convolution's line (CpuOps::runs_in).
// Bit for bit the unfused ops' results: the same sums in the same order
// (bands, threads, lanes), the same comparisons.
//
// Not fused (a fixed rule by the model, so runs stay reproducible): when the
// input gradient is wanted (the conv would need its full output gradient),
// when the conv's output or the pool's (for the ReLU) has another reader,
// other pool shapes, or bands that do not hold whole windows.
//
// A batch norm, or an add of two inputs, whose only reader is a ReLU runs
// that ReLU in its own passes (batch_norm_op.cpp, join_ops.cpp; ResNets'
// conv → BN → ReLU and residual joins): the ReLU's output, not its own, is
// written, and its backward pass masks the ReLU's output gradient by its own
// output recomputed from its inputs (relu_math.h: oneDNN's -0 and NaN bits),
// so the ReLU's forward and backward passes and the tensors between them
// vanish. Its output may have any number of readers, or be the model's.
// When that ReLU follows a batch norm over images and its only reader is a
// max pool, the batch norm runs the pool too (a ResNet's stem): it writes
// only the pooled output and the window positions, one image at a time
// through a per-thread buffer, and routes the pooled gradient back an image
// at a time inside its backward passes (batch_norm_op.cpp). The ReLU's and
// the pool's ops are then both FusedAwayOps.
//
// A max pool whose only reader is a ReLU (the seed CNN's second block: conv
// → pool → ReLU, the conv not a planar one) runs that ReLU in its own passes
// (max_pool2d_op.cpp): it writes the ReLU's output, and masks the ReLU's
// output gradient by it before routing; the ReLU's op is a FusedAwayOp.
// A batch norm over images whose only reader is a flatten (the seed CNN's
// last BN) runs the flatten: it writes its output straight in the flatten's
// C-major order and reads the flat output gradient back an image at a time
// (batch_norm_op.cpp); the flatten's op is a FusedAwayOp.
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_op.h"
#include "convoy/nn/model.h"

namespace convoy::cpu {

struct CpuOps {
  std::vector<std::unique_ptr<CpuOp>> ops;  // one per layer
  // Per layer: the layer whose op does this layer's work, or -1: its own.
  std::vector<int> runs_in;
};

// fuse = false: one op per layer, none fused (the tests' reference).
CpuOps make_cpu_ops(DnnlEnv& env, const nn::Model& model, int64_t batch, const std::vector<uint64_t>& seeds,
                    ConvAlgo algo, bool input_gradient, bool fuse);

}  // namespace convoy::cpu
