// Uneven padding (see kernels.h): explicit zero padding around each plane for
// convolutions, and pools that clip their windows to the image as the CPU's
// own kernels do (backends/cpu/max_pool2d_op.cpp, avg_pool2d_op.cpp). One
// thread per output element; the backward passes gather per input pixel
// (no atomics), visiting the windows that cover it in the order the CPU adds
// them (oy, then ox, ascending), so each sum is the CPU's.
#include <cmath>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.cuh"

namespace convoy::cuda {
namespace {

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{gridDim.x} * blockDim.x)

__global__ void pad_kernel(const float* x, float* padded, int64_t planes, int64_t h, int64_t w, int64_t top,
                           int64_t left, int64_t ph, int64_t pw) {
  GRID_STRIDE(i, planes * ph * pw) {
    const int64_t plane = i / (ph * pw), at = i - plane * ph * pw;
    const int64_t y = at / pw - top, xx = at % pw - left;
    padded[i] = y >= 0 && y < h && xx >= 0 && xx < w ? x[(plane * h + y) * w + xx] : 0.0f;
  }
}

__global__ void crop_kernel(const float* padded, float* x, int64_t planes, int64_t h, int64_t w, int64_t top,
                            int64_t left, int64_t ph, int64_t pw) {
  GRID_STRIDE(i, planes * h * w) {
    const int64_t plane = i / (h * w), at = i - plane * h * w;
    const int64_t y = at / w, xx = at % w;
    x[i] = padded[(plane * ph + y + top) * pw + xx + left];
  }
}

__device__ int64_t clip_begin(int64_t o, const PoolArgs& p, int64_t pad) { return max(o * p.s - pad, int64_t{0}); }
__device__ int64_t clip_end(int64_t o, const PoolArgs& p, int64_t pad, int64_t size) {
  return min(o * p.s - pad + p.k, size);
}

// The outputs whose windows hold input position i on one axis: [first, last].
__device__ void covering(int64_t i, int64_t pad, int64_t outputs, const PoolArgs& p, int64_t& first, int64_t& last) {
  // o*s - pad <= i < o*s - pad + k  <=>  (i + pad - k) / s < o <= (i + pad) / s
  const int64_t hi = i + pad, lo = hi - p.k + 1;
  first = lo <= 0 ? 0 : (lo + p.s - 1) / p.s;
  last = min(hi / p.s, outputs - 1);
}

__global__ void max_pool_forward_kernel(PoolArgs p, const float* x, float* y, uint8_t* argmax) {
  GRID_STRIDE(i, p.planes * p.oh * p.ow) {
    const int64_t plane = i / (p.oh * p.ow), at = i - plane * p.oh * p.ow, oy = at / p.ow, ox = at % p.ow;
    const float* src = x + plane * p.h * p.w;
    float best = -INFINITY;
    int where = 0;
    for (int64_t iy = clip_begin(oy, p, p.top); iy < clip_end(oy, p, p.top, p.h); ++iy)
      for (int64_t ix = clip_begin(ox, p, p.left); ix < clip_end(ox, p, p.left, p.w); ++ix) {
        const float v = src[iy * p.w + ix];
        if (v > best) {  // the first maximum wins; NaN never does (as the CPU's selects)
          best = v;
          where = static_cast<int>((iy - oy * p.s + p.top) * p.k + (ix - ox * p.s + p.left));
        }
      }
    y[i] = best;
    argmax[i] = static_cast<uint8_t>(where);
  }
}

__global__ void max_pool_backward_kernel(PoolArgs p, const uint8_t* argmax, const float* dy, float* dx) {
  GRID_STRIDE(i, p.planes * p.h * p.w) {
    const int64_t plane = i / (p.h * p.w), at = i - plane * p.h * p.w, iy = at / p.w, ix = at % p.w;
    int64_t y0, y1, x0, x1;
    covering(iy, p.top, p.oh, p, y0, y1);
    covering(ix, p.left, p.ow, p, x0, x1);
    float sum = 0;
    for (int64_t oy = y0; oy <= y1; ++oy)
      for (int64_t ox = x0; ox <= x1; ++ox) {
        const int64_t o = (plane * p.oh + oy) * p.ow + ox;
        if (argmax[o] == (iy - oy * p.s + p.top) * p.k + (ix - ox * p.s + p.left)) sum += dy[o];
      }
    dx[i] = sum;
  }
}

__device__ float avg_divisor(const PoolArgs& p, int64_t oy, int64_t ox) {
  if (p.count_include_pad) return static_cast<float>(p.k * p.k);
  return static_cast<float>((clip_end(oy, p, p.top, p.h) - clip_begin(oy, p, p.top)) *
                            (clip_end(ox, p, p.left, p.w) - clip_begin(ox, p, p.left)));
}

__global__ void avg_pool_forward_kernel(PoolArgs p, const float* x, float* y) {
  GRID_STRIDE(i, p.planes * p.oh * p.ow) {
    const int64_t plane = i / (p.oh * p.ow), at = i - plane * p.oh * p.ow, oy = at / p.ow, ox = at % p.ow;
    const float* src = x + plane * p.h * p.w;
    float sum = 0;
    for (int64_t iy = clip_begin(oy, p, p.top); iy < clip_end(oy, p, p.top, p.h); ++iy)
      for (int64_t ix = clip_begin(ox, p, p.left); ix < clip_end(ox, p, p.left, p.w); ++ix) sum += src[iy * p.w + ix];
    y[i] = __fmul_rn(sum, __fdiv_rn(1.0f, avg_divisor(p, oy, ox)));
  }
}

__global__ void avg_pool_backward_kernel(PoolArgs p, const float* dy, float* dx) {
  GRID_STRIDE(i, p.planes * p.h * p.w) {
    const int64_t plane = i / (p.h * p.w), at = i - plane * p.h * p.w, iy = at / p.w, ix = at % p.w;
    int64_t y0, y1, x0, x1;
    covering(iy, p.top, p.oh, p, y0, y1);
    covering(ix, p.left, p.ow, p, x0, x1);
    float sum = 0;
    for (int64_t oy = y0; oy <= y1; ++oy)
      for (int64_t ox = x0; ox <= x1; ++ox)
        sum = __fadd_rn(sum, __fmul_rn(dy[(plane * p.oh + oy) * p.ow + ox], __fdiv_rn(1.0f, avg_divisor(p, oy, ox))));
    dx[i] = sum;
  }
}

}  // namespace

void pad_planes(const float* x, float* padded, int64_t planes, int64_t h, int64_t w, int64_t top, int64_t left,
                int64_t padded_h, int64_t padded_w, cudaStream_t stream) {
  pad_kernel<<<blocks_for(planes * padded_h * padded_w), kThreads, 0, stream>>>(x, padded, planes, h, w, top, left,
                                                                                padded_h, padded_w);
  CUDA_CHECK_LAUNCH("pad_kernel");
}

void crop_planes(const float* padded, float* x, int64_t planes, int64_t h, int64_t w, int64_t top, int64_t left,
                 int64_t padded_h, int64_t padded_w, cudaStream_t stream) {
  crop_kernel<<<blocks_for(planes * h * w), kThreads, 0, stream>>>(padded, x, planes, h, w, top, left, padded_h,
                                                                   padded_w);
  CUDA_CHECK_LAUNCH("crop_kernel");
}

void max_pool_forward(const PoolArgs& p, const float* x, float* y, uint8_t* argmax, cudaStream_t stream) {
  max_pool_forward_kernel<<<blocks_for(p.planes * p.oh * p.ow), kThreads, 0, stream>>>(p, x, y, argmax);
  CUDA_CHECK_LAUNCH("max_pool_forward_kernel");
}

void max_pool_backward(const PoolArgs& p, const uint8_t* argmax, const float* dy, float* dx, cudaStream_t stream) {
  max_pool_backward_kernel<<<blocks_for(p.planes * p.h * p.w), kThreads, 0, stream>>>(p, argmax, dy, dx);
  CUDA_CHECK_LAUNCH("max_pool_backward_kernel");
}

void avg_pool_forward(const PoolArgs& p, const float* x, float* y, cudaStream_t stream) {
  avg_pool_forward_kernel<<<blocks_for(p.planes * p.oh * p.ow), kThreads, 0, stream>>>(p, x, y);
  CUDA_CHECK_LAUNCH("avg_pool_forward_kernel");
}

void avg_pool_backward(const PoolArgs& p, const float* dy, float* dx, cudaStream_t stream) {
  avg_pool_backward_kernel<<<blocks_for(p.planes * p.h * p.w), kThreads, 0, stream>>>(p, dy, dx);
  CUDA_CHECK_LAUNCH("avg_pool_backward_kernel");
}

}  // namespace convoy::cuda
