#include "convoy/optim/sgd.h"

#include <cstdint>

namespace convoy::optim {

void sgd_update(std::span<float> params, std::span<const float> grads, std::span<float> velocity,
                const SgdOptions& opt) {
  float* __restrict p = params.data();
  const float* __restrict g = grads.data();
  float* __restrict v = velocity.data();
  const auto n = static_cast<int64_t>(params.size());
  const float lr = opt.lr, mu = opt.momentum, wd = opt.weight_decay;
  // The seed network has ~22k parameters: one thread beats waking a team.
  if (opt.nesterov) {
#pragma omp parallel for simd schedule(static) if (n > (1 << 18))
    for (int64_t i = 0; i < n; ++i) {
      float gi = g[i] + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= lr * (gi + mu * v[i]);
    }
  } else {
#pragma omp parallel for simd schedule(static) if (n > (1 << 18))
    for (int64_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + g[i] + wd * p[i];
      p[i] -= lr * v[i];
    }
  }
}

}  // namespace convoy::optim
