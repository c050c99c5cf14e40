#pragma once
// The loss and the optimizer update as StableHLO, for the PJRT device
// (pjrt_device.cpp). Both follow the CPU backend's arithmetic (backends/cpu/softmax_kernels.cpp,
// optim/optimizer_update.cpp) operation for operation where it matters.
#include <optional>

#include "backends/pjrt/hlo_builder.h"
#include "convoy/backends/executable.h"

namespace convoy::pjrt {

struct LossOut {
  Val loss_sum, correct;  // f32[] each
  std::optional<Val> d_out;
};

// The loss of out [rows, classes] against dense targets `raw` of the same
// shape (class indices arrive one-hot); valid: f32 [rows] of 1 (counted) and
// 0 (padding), or none (all count). gradient: d(mean loss)/d(out) too.
LossOut emit_loss(HloBuilder& b, Loss loss, float smoothing, const Val& out, const Val& raw,
                  const std::optional<Val>& valid, bool gradient);

struct Updated {
  Val params, opt;
};

// One optimizer update of flat parameters p [n] with gradients g and the
// optimizer's state opt [optim::state_size(o, n)]; lr_scalar: f32[].
Updated emit_update(HloBuilder& b, const optim::OptimizerOptions& o, const Val& p, Val g, const Val& opt,
                    const Val& lr_scalar);

}  // namespace convoy::pjrt
