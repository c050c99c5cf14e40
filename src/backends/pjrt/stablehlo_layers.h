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
// Parameters and state arrive as the model's flat buffers (one f32 vector
// each, in parameter order); gradients leave as one flat vector too, so the
// optimizer and the host see what the CPU backend's buffers hold.
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

  // params: f32[max(P, 1)], state: f32[max(Q, 1)] (the flat buffers).
  // sync_replicas > 1: synchronised batch norm over that many replicas of the
  // program (the per-channel sums of the forward and backward all-reduced,
  // as the CPU backend's StatisticsReducer); 1: this replica's batch alone.
  LayerEmitter(HloBuilder& b, const nn::Model& model, int64_t batch, Val params, Val state,
               int64_t sync_replicas = 1);
  // One layer at a time (the PJRT device's ops): slots read from wherever
  // the caller keeps them.
  LayerEmitter(HloBuilder& b, const nn::Model& model, int64_t batch, SlotSource params, SlotSource state);

  // Activations from the input x [batch, input_shape...]; masks: one per
  // dropout layer in layer order (training only). Returns the model output.
  Val forward(const Val& x, bool training, const std::vector<Val>& masks = {});
  // After a training forward: the running statistics after this step (the
  // whole flat state vector).
  Val new_state();
  // After a training forward: d loss / d parameters as the flat vector,
  // given d loss / d output.
  Val backward(const Val& d_output);

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
  Val params_, state_;
  SlotSource params_slot_, state_slot_;
  int64_t sync_replicas_;
  std::vector<Saved> saved_;
};

}  // namespace convoy::pjrt
