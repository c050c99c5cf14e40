#pragma once
// Transfer learning's phases (docs/transfer.md), shared by the run (which
// compiles each phase) and the checkpoint reader (which must know which
// layers trained to size the optimizer state it reads back).
#include <cstdint>
#include <string>
#include <vector>

#include "convoy/nn/model.h"
#include "convoy/config/run_config.h"

namespace convoy::train {

// With transfer.freeze_epochs the first epochs train the head alone (every
// other layer frozen, batch norm on its running statistics); the rest train
// every layer at transfer.fine_tune_lr. Without it: one phase, all layers.
struct Phase {
  int64_t last_epoch;
  bool frozen;
  double lr;
};
std::vector<Phase> phases_of(const RunConfig& c);
// The phase a run continues in after `epochs_done` epochs.
std::size_t phase_at(const std::vector<Phase>& phases, int64_t epochs_done);

// The head: model.head, else the last layer with parameters. It is what a
// pretrained file does not provide and what trains while the rest is frozen.
std::string head_of(const nn::Model& model, const RunConfig& c);

// Marks which layers train in a phase (see set_frozen in transfer.cpp).
void set_phase_layers(nn::Model& model, const RunConfig& c, bool frozen);

}  // namespace convoy::train
