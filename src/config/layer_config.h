#pragma once
// Private to config/ (and app/model_files.cpp, which writes a KerasModel's run config):
// model layers written in a run config, both ways.
//   model:
//     layers:
//       - {type: conv2d, filters: 32, kernel: 3, padding: 1}
//       - relu                                  # a bare name: no options
//       - {type: add, inputs: [input, relu_0]}   # joins name their inputs
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convoy/config/run_config.h"

namespace convoy::train {

// `list` is the value of model.layers; errors name `where` and the item
// ("configs/x.yaml: model.layers[2]: unknown layer type 'conv3d' ...").
std::vector<LayerSpec> layers_from_json(const nlohmann::json& list, const std::string& where);
nlohmann::json layers_to_json(const std::vector<LayerSpec>& layers);

}  // namespace convoy::train
