#pragma once
// A model's layers as StableHLO: the forward pass in training or inference
// mode, and the backward pass with hand-written vector-Jacobian products,
// over the model's graph (nn::Model's layer list, inputs by index) with the
// CPU backend's semantics (PyTorch's): batch-norm statistics over the batch
// with the biased variance (running variance unbiased, momentum 0.1), max
// pooling's gradient to the first maximum of each window, dropout through
// masks the host passes in (the CPU backend's own draws), frozen layers
// (trainable: false) as the CPU's: no parameter gradients (the caller
// writes zeros), batch norm in inference mode in training steps too.
//
// One layer at a time (the PJRT device's ops): parameters and state slots
// come from wherever the caller keeps them (the device's flat buffers).
#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "backends/pjrt/hlo_builder.h"
#include "convoy/nn/model.h"

namespace convoy::pjrt {

// Empty when the emitter has every layer of `model`; else one line naming
// the first layer (or setting) it has no StableHLO for.
std::string layers_unsupported(const nn::Model& model);

class LayerEmitter {
 public:
  // Where a layer's parameter and state slots come from (reshaped to the slot's shape).
  using SlotSource = std::function<Val(const nn::ParamSlot&)>;

  LayerEmitter(HloBuilder& b, const nn::Model& model, int64_t batch, SlotSource params, SlotSource state);
  // From now on, batch norm synchronised over `replicas` replicas of the
  // program (the per-channel sums of the forward and backward all-reduced,
  // as the CPU backend's StatisticsReducer); 1: each replica's batch alone.
  void synchronise(int64_t replicas) { sync_replicas_ = replicas; }

  // Layer i alone: its output from its inputs (mask: dropout's, training
  // only); what its backward needs is kept until the next forward of i.
  Val layer_forward(std::size_t i, const std::vector<Val>& in, bool training, const Val* mask);
  // After layer_forward(i, .., true): gradients of its inputs (one per
  // input; wants_dx[k] false: input k's is not emitted and its place holds
  // the input) and of its parameters (in slot order).
  std::vector<Val> layer_backward(std::size_t i, const Val& dy, std::vector<Val>& param_grads,
                                  const std::vector<bool>& wants_dx);
  // After a training layer_forward of batch norm i: its new running mean and variance.
  std::pair<Val, Val> running_statistics(std::size_t i) const;

 private:
  struct Saved {  // what a layer's backward needs from its forward
    std::vector<Val> in;
    Val out;
    std::vector<Val> vals;
  };
  Val param(const nn::ParamSlot& slot) { return params_slot_(slot); }
  Val state_slot(const nn::ParamSlot& slot) { return state_slot_(slot); }
  Val over_replicas(const Val& sums);  // summed over replicas when batch norm is synchronised
  Shape batched(const Shape& s) const;

  HloBuilder& b_;
  const nn::Model& model_;
  int64_t batch_;
  SlotSource params_slot_, state_slot_;
  int64_t sync_replicas_ = 1;
  std::vector<Saved> saved_;
};

}  // namespace convoy::pjrt
