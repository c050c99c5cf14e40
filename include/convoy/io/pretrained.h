#pragma once
// Pretrained weights in: a PyTorch state dict saved as safetensors
//   from safetensors.torch import save_file; save_file(model.state_dict(), "resnet18.safetensors")
// mapped onto a model by tensor name. The zoo's architectures use
// torchvision's (and geffnet's) names, so their state dicts map one to one.
// BN's num_batches_tracked counters are ignored.
#include <string>
#include <vector>

#include "convoy/io/model_weights.h"
#include "convoy/nn/model.h"

namespace convoy::io {

struct PretrainedOptions {
  // Model tensors whose name starts with one of these keep their values in
  // `into` and are not looked up (a new head: {"fc."}); file tensors with these
  // prefixes are ignored too (the old head).
  std::vector<std::string> skip_prefixes;
  // Also accept file tensors that match no model tensor (a backbone taken
  // from a larger network); by default each is an error naming it.
  bool allow_unused = false;
};

// Overwrites the model's tensors in `into` (e.g. fresh from initial_parameters
// and initial_state) with the file's. Returns how many tensors were loaded.
// A missing tensor, a shape or dtype mismatch or an unused file tensor throws
// one UserError naming the file, the tensor and the shapes.
int load_pytorch_weights(const nn::Model& model, const std::string& path, FlatWeights& into,
                         const PretrainedOptions& options = {});

}  // namespace convoy::io
