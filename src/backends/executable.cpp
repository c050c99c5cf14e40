#include "convoy/backends/executable.h"

namespace convoy {

int64_t Executable::train_steps(const float* x, Targets y, int64_t n) {
  const int64_t batch = batch_size();
  for (int64_t i = 0; i < n; ++i) {
    const Targets step = y.dense ? Targets::rows(y.dense + i * batch * output_size()) : Targets(y.labels + i * batch);
    train_step(x + i * batch * input_size(), step);
    if (!last_step_finite()) return i + 1;
  }
  return n;
}

}  // namespace convoy
