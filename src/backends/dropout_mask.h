#pragma once
// Dropout's masks as one formula of (layer seed, step, example, element),
// evaluated by the CPU's kernel (backends/cpu/dropout_op.cpp) and by each GPU
// thread for its own element, so runs with one seed drop the same elements
// on every device.
//
// Example n's draws are those of Rng(Rng(s).next_u64()) (core/rng.h) with
// s = seed + golden * (step * batch + n + 1), one uniform01() per element in
// the CPU's activation layout (NHWC for images). Rng is SplitMix64, whose
// k-th output is mix(state + (k + 1) * golden): counter-based, no sequence to
// walk. Plain integer and float arithmetic, so host and device agree bit for
// bit; tests/test_cuda_dropout_mask.cpp checks the formula against Rng.
#include <cstdint>

#ifndef CONVOY_HOST_DEVICE
#if defined(__CUDACC__)
#define CONVOY_HOST_DEVICE __host__ __device__
#else
#define CONVOY_HOST_DEVICE
#endif
#endif

namespace convoy {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// SplitMix64's output for a generator whose state is `state` before the
// call: Rng(state).next_u64() (core/rng.h).
CONVOY_HOST_DEVICE inline uint64_t splitmix64(uint64_t state) {
  uint64_t z = state + kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The seed of layer `index`'s masks, derived from the model's seed.
CONVOY_HOST_DEVICE inline uint64_t dropout_layer_seed(uint64_t model_seed, uint64_t index) {
  return splitmix64(model_seed ^ (0xD1B54A32D192ED03ull * (index + 1)));
}

// Example n's stream start at training step `step` (the state its Rng begins with).
CONVOY_HOST_DEVICE inline uint64_t dropout_example_stream(uint64_t layer_seed, int64_t step, int64_t batch,
                                                          int64_t n) {
  return splitmix64(layer_seed + kGolden * static_cast<uint64_t>(step * batch + n + 1));
}

// True when element k (in the CPU's activation layout) of the example whose
// stream is `stream` is dropped: its uniform01() draw is below `rate`.
CONVOY_HOST_DEVICE inline bool dropout_drops(uint64_t stream, int64_t k, float rate) {
  const uint64_t bits = splitmix64(stream + static_cast<uint64_t>(k) * kGolden);
  return static_cast<float>(bits >> 40) * 0x1.0p-24f < rate;
}

// Where element j of an NCHW example (j = (c * pixels) + p) sits in the CPU's
// NHWC layout (p * channels + c). Vectors: pixels = 1, so k = j.
CONVOY_HOST_DEVICE inline int64_t dropout_cpu_index(int64_t j, int64_t channels, int64_t pixels) {
  return (j % pixels) * channels + j / pixels;
}

}  // namespace convoy
