#pragma once
// The training losses CompileOptions::loss names. Plain C++ with no other
// headers, so every device's loss kernel (nvcc included) reads the same enum.

namespace convoy {

enum class Loss {
  nll,                    // model outputs log-probabilities (e.g. ends in LogSoftmax); -sum t*out
  softmax_cross_entropy,  // model outputs logits; categorical cross-entropy of softmax(out)
  binary_cross_entropy,   // model outputs logits; per-class sigmoid BCE averaged over classes (multi-label)
};

}  // namespace convoy
