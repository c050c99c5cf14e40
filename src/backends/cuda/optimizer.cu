// The optimizer update over the flat buffers, as optim::step on the CPU
// (optim/optimizer.cpp): the same update rules in the same order of
// operations, one fused kernel per optimizer kind. Scalars that change while
// a captured CUDA graph is replayed (learning rate, clip scale, Adam's bias
// corrections) are read from device memory.
#include <cmath>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace convoy::cuda {
namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

// Pass 1 of the global norm: per-block sums of squares in double.
__global__ void norm_partials_kernel(const float* g, int64_t n, DeviceScalars* s) {
  __shared__ double part[kThreads];
  double sum = 0;
  GRID_STRIDE(i, n) sum += static_cast<double>(g[i]) * g[i];
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) s->norm_partials[blockIdx.x] = part[0];
}

// Pass 2 (one block of kNormBlocks threads): the norm and the scale, as
// torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6) when norm > max_norm.
__global__ void clip_scale_kernel(float max_norm, DeviceScalars* s) {
  __shared__ double part[kNormBlocks];
  part[threadIdx.x] = s->norm_partials[threadIdx.x];
  __syncthreads();
  for (int half = kNormBlocks / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const double norm = sqrt(part[0]);
    s->clip_scale = norm <= max_norm ? 1.0f : static_cast<float>(max_norm / (norm + 1e-6));
  }
}

// The gradient of element i after clipping (written back, as the CPU clips in place).
template <bool Clip>
__device__ float clipped(float* g, int64_t i, const DeviceScalars* s) {
  if (!Clip) return g[i];
  const float v = g[i] * s->clip_scale;
  g[i] = v;
  return v;
}

template <bool Clip>
__global__ void sgd_kernel(float* p, float* g, float* v, int64_t n, float mu, float wd, bool nesterov,
                           const DeviceScalars* s) {
  if (!s->step_ok) return;
  const float lr = s->lr;
  GRID_STRIDE(i, n) {
    const float gi = clipped<Clip>(g, i, s);
    if (nesterov) {
      const float gd = gi + wd * p[i];
      v[i] = mu * v[i] + gd;
      p[i] -= lr * (gd + mu * v[i]);
    } else {
      v[i] = mu * v[i] + gi + wd * p[i];
      p[i] -= lr * v[i];
    }
  }
}

// One thread: Adam's step count (state[2n], a float as on the CPU) and this
// step's bias corrections.
__global__ void adam_prepare_kernel(float* t, float b1, float b2, DeviceScalars* s) {
  if (!s->step_ok) return;
  const float step = *t + 1;
  *t = step;
  s->adam_c1 = 1.0f / (1.0f - powf(b1, step));
  s->adam_c2 = 1.0f / (1.0f - powf(b2, step));
}

template <bool Clip>
__global__ void adam_kernel(float* p, float* g, float* m, float* v, int64_t n, float b1, float b2, float eps,
                            float wd, bool decoupled, const DeviceScalars* s) {
  if (!s->step_ok) return;
  const float lr = s->lr, c1 = s->adam_c1, c2 = s->adam_c2;
  const float l2 = decoupled ? 0.0f : wd, shrink = decoupled ? 1.0f - lr * wd : 1.0f;
  GRID_STRIDE(i, n) {
    const float gi = clipped<Clip>(g, i, s) + l2 * p[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    p[i] = p[i] * shrink - lr * (m[i] * c1) / (sqrtf(v[i] * c2) + eps);
  }
}

template <bool Clip>
__global__ void rmsprop_kernel(float* p, float* g, float* sq, float* b, int64_t n, float a, float eps, float mu,
                               float wd, const DeviceScalars* s) {
  if (!s->step_ok) return;
  const float lr = s->lr;
  GRID_STRIDE(i, n) {
    const float gi = clipped<Clip>(g, i, s) + wd * p[i];
    sq[i] = a * sq[i] + (1 - a) * gi * gi;
    const float d = gi / (sqrtf(sq[i]) + eps);
    b[i] = mu * b[i] + d;
    p[i] -= lr * (mu > 0 ? b[i] : d);
  }
}

template <bool Clip>
void update(const optim::OptimizerOptions& o, float* p, float* g, float* st, int64_t n, DeviceScalars* s, cudaStream_t stream) {
  const unsigned blocks = blocks_for(n);
  switch (o.kind) {
    case optim::Kind::sgd:
      sgd_kernel<Clip><<<blocks, kThreads, 0, stream>>>(p, g, st, n, o.momentum, o.weight_decay, o.nesterov, s);
      CUDA_CHECK_LAUNCH("sgd_kernel");
      return;
    case optim::Kind::adam:
    case optim::Kind::adamw:
      adam_prepare_kernel<<<1, 1, 0, stream>>>(st + 2 * n, o.beta1, o.beta2, s);
      CUDA_CHECK_LAUNCH("adam_prepare_kernel");
      adam_kernel<Clip><<<blocks, kThreads, 0, stream>>>(p, g, st, st + n, n, o.beta1, o.beta2, o.eps,
                                                          o.weight_decay, o.kind == optim::Kind::adamw, s);
      CUDA_CHECK_LAUNCH("adam_kernel");
      return;
    case optim::Kind::rmsprop:
      rmsprop_kernel<Clip><<<blocks, kThreads, 0, stream>>>(p, g, st, st + n, n, o.alpha, o.eps, o.momentum,
                                                             o.weight_decay, s);
      CUDA_CHECK_LAUNCH("rmsprop_kernel");
      return;
  }
}

}  // namespace

void optimizer_step(const optim::OptimizerOptions& opt, float* params, float* grads, float* state, int64_t n,
                    DeviceScalars* scalars, cudaStream_t stream) {
  if (n == 0) return;
  if (opt.clip_norm <= 0) return update<false>(opt, params, grads, state, n, scalars, stream);
  norm_partials_kernel<<<kNormBlocks, kThreads, 0, stream>>>(grads, n, scalars);
  CUDA_CHECK_LAUNCH("norm_partials_kernel");
  clip_scale_kernel<<<1, kNormBlocks, 0, stream>>>(opt.clip_norm, scalars);
  CUDA_CHECK_LAUNCH("clip_scale_kernel");
  update<true>(opt, params, grads, state, n, scalars, stream);
}

}  // namespace convoy::cuda
