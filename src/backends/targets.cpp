#include "backends/targets.h"

#include <string>

#include "convoy/core/error.h"

namespace convoy {

void check_label(int32_t label, int64_t cols) {
  if (label < 0 || label >= cols)
    throw UserError("label " + std::to_string(label) + " is outside [0, " + std::to_string(cols) +
                    ") for a model with " + std::to_string(cols) + " outputs; check the dataset's labels");
}

void check_target_kind(Loss loss, Targets targets) {
  require(targets.labels || targets.dense, "loss: no targets given");
  require(loss != Loss::binary_cross_entropy || targets.dense,
          "binary cross-entropy needs one-hot or multi-hot label rows, got class indices; "
          "use softmax cross-entropy for single-label data");
}

void check_targets(Loss loss, Targets targets, int64_t rows, int64_t cols) {
  check_target_kind(loss, targets);
  if (targets.dense) return;
  for (int64_t i = 0; i < rows; ++i) check_label(targets.labels[i], cols);
}

}  // namespace convoy
