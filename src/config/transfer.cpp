#include "transfer.h"

#include <variant>

#include "convoy/core/error.h"

namespace convoy::train {

std::vector<Phase> phases_of(const RunConfig& c) {
  if (c.freeze_epochs == 0) return {{c.epochs, false, c.lr}};
  std::vector<Phase> phases{{c.freeze_epochs, true, c.lr}};
  if (c.epochs > c.freeze_epochs) phases.push_back({c.epochs, false, c.fine_tune_lr > 0 ? c.fine_tune_lr : c.lr});
  return phases;
}

std::size_t phase_at(const std::vector<Phase>& phases, int64_t epochs_done) {
  std::size_t p = 0;
  while (p + 1 < phases.size() && epochs_done >= phases[p].last_epoch) ++p;
  return p;
}

std::string head_of(const nn::Model& model, const RunConfig& c) {
  if (!c.head.empty()) return c.head;
  const auto& layers = model.layers();
  for (auto it = layers.rbegin(); it != layers.rend(); ++it)
    if (!it->params.empty()) return it->name;
  throw UserError("model.head: the model has no layer with parameters");
}

// Frozen: the head alone trains. Otherwise every layer, except that a
// pretrained network's batch norms stay on their running statistics with
// scale and shift fixed (Keras' advice for fine-tuning): a small batch's
// statistics would replace ImageNet's, and the first fine-tune steps would
// undo what the head learned. transfer.fine_tune_batch_norm trains them too.
void set_phase_layers(nn::Model& model, const RunConfig& c, bool frozen) {
  const std::string head = head_of(model, c);
  model.set_trainable(!frozen);
  try {
    model.set_trainable(true, head);
  } catch (const UserError& e) {
    throw UserError(std::string("model.head: ") + e.what());
  }
  if (frozen || c.pretrained.empty() || c.fine_tune_batch_norm) return;
  for (const auto& layer : model.layers())
    if (std::holds_alternative<nn::BatchNorm>(layer.layer) && layer.name != head && !layer.name.starts_with(head + "."))
      model.set_trainable(false, layer.name);
}

}  // namespace convoy::train
