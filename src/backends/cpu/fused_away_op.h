#pragma once
// A layer whose work another layer's op (its fused chain's head) does
// (conv_pool_op.h, CpuOps::runs_in): binding hands the head this layer's
// buffers, read when the head runs (the layers bind in model order, the
// head first); its own forward and backward passes do nothing.
#include <memory>
#include <utility>

#include "backends/cpu/cpu_op.h"

namespace convoy::cpu {

class FusedAwayOp final : public CpuOp {
 public:
  // slot: where the head reads this layer's buffers (an aliasing pointer
  // into the head's shared state will do).
  explicit FusedAwayOp(std::shared_ptr<OpBuffers> slot) : slot_(std::move(slot)) {}
  void bind(DnnlEnv&, const OpBuffers& b) override { *slot_ = b; }
  void forward(DnnlEnv&, bool) override {}
  void backward(DnnlEnv&) override {}

 private:
  std::shared_ptr<OpBuffers> slot_;
};

}  // namespace convoy::cpu
