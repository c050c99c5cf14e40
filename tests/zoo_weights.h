#pragma once
// The zoo parity fixtures' weights, made on both sides from a seed (the C++
// half of the contract in tests/fixtures/make_zoo_parity_fixtures.py): tensor
// `name` draws from Rng(fnv1a64(name) ^ 0xC0FFEE).
#include <cmath>
#include <string>
#include <vector>

#include "convoy/core/rng.h"
#include "convoy/nn/model.h"

namespace convoy::testing {

inline uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

inline void fill_deterministic(const nn::ParamSlot& slot, float* out) {
  const std::string& name = slot.name;
  float lo = 0.5f, hi = 1.5f;  // running_var and batch-norm weights
  if (name.ends_with("running_mean") || name.ends_with(".bias")) {
    lo = -0.1f;
    hi = 0.1f;
  } else if (slot.shape.size() > 1) {
    hi = std::sqrt(3.0f / static_cast<float>(slot.size() / slot.shape[0]));
    lo = -hi;
  }
  Rng rng(fnv1a64(name) ^ 0xC0FFEEull);
  for (int64_t i = 0; i < slot.size(); ++i) out[i] = rng.uniform(lo, hi);
}

struct DeterministicWeights {
  std::vector<float> params, state;
};

inline DeterministicWeights deterministic_weights(const nn::Model& model) {
  DeterministicWeights w{std::vector<float>(model.num_parameters()), std::vector<float>(model.num_state())};
  for (const auto& plan : model.layers()) {
    for (const auto& s : plan.params) fill_deterministic(s, w.params.data() + s.offset);
    for (const auto& s : plan.state) fill_deterministic(s, w.state.data() + s.offset);
  }
  return w;
}

}  // namespace convoy::testing
