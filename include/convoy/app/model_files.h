#pragma once
// Keras's model.save(dir) and keras.models.load_model(dir) for a KerasModel
// (train/keras_model.h), in the layout of `convoy train --out DIR`:
// DIR/checkpoint.safetensors (weights, optimizer state, history and a run
// config that rebuilds the model) and DIR/model.safetensors (save_weights').
// So `convoy evaluate/predict/export --checkpoint DIR` read a saved model, and
// load_model reads a train run's folder, compiled as that run was
// (optimizer, loss, batch size, device). They live above train/ because the
// folder's model is described by a run config (config/).
#include <string>

#include "convoy/train/keras_model.h"

namespace convoy::train {

// Writes the least run config that describes the model: a zoo name when the
// model is that zoo model, else its layer list; the data section says only
// the input shape (idx for Fashion-MNIST's [1, 28, 28], else a class-folder
// run of that size with classes "class_0"...), since the model does not know
// how its inputs were prepared. Throws UserError before compile() and when
// the config cannot express the model (layers renamed outside the zoo, a
// frozen layer).
void save_model(KerasModel& model, const std::string& dir);
// The model of the newest usable checkpoint in `dir` (see
// load_latest_checkpoint), compiled, with its weights, optimizer state,
// learning rate and history (KerasModel::restore).
KerasModel load_model(const std::string& dir);

}  // namespace convoy::train
