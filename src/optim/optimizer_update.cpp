// The optimizer's arithmetic over the flat buffers. Compiled once per
// instruction set with the CPU backend (cmake/isa_units.cmake); optim::step
// outside it is the dispatcher's (src/backends/cpu_kernels.cpp).
#include "convoy/optim/optimizer.h"

#include <cmath>

#include "convoy/core/error.h"

namespace convoy::optim {
namespace {

// The parameter count of the seed network (~22k) makes one thread faster than
// waking a team; larger models update in parallel.
constexpr int64_t kParallelFrom = int64_t{1} << 18;

void clip(std::span<float> grads, float max_norm) {
  double sq = 0;
  for (float g : grads) sq += static_cast<double>(g) * g;
  const double norm = std::sqrt(sq);
  if (norm <= max_norm) return;
  const auto scale = static_cast<float>(max_norm / (norm + 1e-6));
  for (float& g : grads) g *= scale;
}

void sgd(const OptimizerOptions& o, float* __restrict p, const float* __restrict g, float* __restrict v, int64_t n) {
  const float lr = o.lr, mu = o.momentum, wd = o.weight_decay;
  if (o.nesterov) {
#pragma omp parallel for simd schedule(static) if (n > kParallelFrom)
    for (int64_t i = 0; i < n; ++i) {
      const float gi = g[i] + wd * p[i];
      v[i] = mu * v[i] + gi;
      p[i] -= lr * (gi + mu * v[i]);
    }
  } else {
#pragma omp parallel for simd schedule(static) if (n > kParallelFrom)
    for (int64_t i = 0; i < n; ++i) {
      v[i] = mu * v[i] + g[i] + wd * p[i];
      p[i] -= lr * v[i];
    }
  }
}

void adam(const OptimizerOptions& o, float* __restrict p, const float* __restrict g, float* __restrict m,
          float* __restrict s, float& t, int64_t n) {
  t += 1;  // exact up to 2^24 steps
  const float b1 = o.beta1, b2 = o.beta2, eps = o.eps, lr = o.lr;
  const float c1 = 1.0f / (1.0f - std::pow(b1, t)), c2 = 1.0f / (1.0f - std::pow(b2, t));
  const bool decoupled = o.kind == Kind::adamw;
  const float l2 = decoupled ? 0.0f : o.weight_decay, shrink = decoupled ? 1.0f - lr * o.weight_decay : 1.0f;
#pragma omp parallel for simd schedule(static) if (n > kParallelFrom)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + l2 * p[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    s[i] = b2 * s[i] + (1 - b2) * gi * gi;
    p[i] = p[i] * shrink - lr * (m[i] * c1) / (std::sqrt(s[i] * c2) + eps);
  }
}

void rmsprop(const OptimizerOptions& o, float* __restrict p, const float* __restrict g, float* __restrict s,
             float* __restrict b, int64_t n) {
  const float a = o.alpha, eps = o.eps, lr = o.lr, mu = o.momentum, wd = o.weight_decay;
#pragma omp parallel for simd schedule(static) if (n > kParallelFrom)
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    s[i] = a * s[i] + (1 - a) * gi * gi;
    const float d = gi / (std::sqrt(s[i]) + eps);
    b[i] = mu * b[i] + d;
    p[i] -= lr * (mu > 0 ? b[i] : d);
  }
}

}  // namespace

void step(const OptimizerOptions& opt, std::span<float> params, std::span<float> grads, std::span<float> state) {
  const auto n = static_cast<int64_t>(params.size());
  if (opt.clip_norm > 0) clip(grads, opt.clip_norm);
  float* st = state.data();
  switch (opt.kind) {
    case Kind::sgd: return sgd(opt, params.data(), grads.data(), st, n);
    case Kind::adam:
    case Kind::adamw: return adam(opt, params.data(), grads.data(), st, st + n, st[2 * n], n);
    case Kind::rmsprop: return rmsprop(opt, params.data(), grads.data(), st, st + n, n);
  }
}

}  // namespace convoy::optim
