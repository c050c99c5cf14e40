#include "convoy/nn/zoo.h"

#include "convoy/core/error.h"

namespace convoy::nn {

Model model_by_name(const std::string& name) {
  if (name == "seed_cnn") return seed_cnn();
  throw UserError("unknown model '" + name + "'; available: seed_cnn");
}

}  // namespace convoy::nn
