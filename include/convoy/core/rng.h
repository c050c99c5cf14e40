#pragma once
// Deterministic random numbers: the same seed gives the same stream on every
// machine and compiler (no std:: distributions, whose output is unspecified).
#include <cstdint>
#include <span>

namespace convoy {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // SplitMix64: tiny, fast, passes BigCrush; good enough for init and shuffles.
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 24 random bits, exactly representable in float.
  float uniform01() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform01(); }
  // Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject).
  uint64_t below(uint64_t n);

 private:
  uint64_t state_;
};

// Fisher-Yates shuffle driven by `rng`.
void shuffle(std::span<int64_t> items, Rng& rng);

}  // namespace convoy
