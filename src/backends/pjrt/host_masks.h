#pragma once
// Dropout's masks drawn on the host for the PJRT backend, as the CPU backend
// draws them (backends/dropout_mask.h), so a PJRT run drops exactly the
// elements a CPU run drops: `batch` examples of shape `example` at training
// step `step`, each element 0 (dropped) or 1 / (1 - rate).
#include <cstdint>
#include <span>

#include "backends/dropout_mask.h"
#include "convoy/core/tensor.h"

namespace convoy::pjrt {

inline void draw_dropout_masks(std::span<float> out, const Shape& example, float rate, uint64_t layer_seed,
                               int64_t step, int64_t batch) {
  const int64_t per = numel(example);
  const int64_t channels = example.size() == 3 ? example[0] : per;
  const int64_t pixels = example.size() == 3 ? example[1] * example[2] : 1;
  const float keep = 1.0f / (1.0f - rate);
  for (int64_t e = 0; e < batch; ++e) {
    const uint64_t stream = dropout_example_stream(layer_seed, step, batch, e);
    float* m = out.data() + e * per;
    for (int64_t j = 0; j < per; ++j)
      m[j] = rate > 0 && dropout_drops(stream, dropout_cpu_index(j, channels, pixels), rate) ? 0.0f : keep;
  }
}

}  // namespace convoy::pjrt
