#pragma once
// convoy's own CUDA kernels (elementwise.cu, activations.cu, gates.cu,
// padding_pools.cu, frozen.cu, guard.cu, softmax_loss.cu, optimizer.cu),
// behind plain launch functions: callers need no CUDA syntax. Each launcher
// enqueues on `stream` and checks the launch. The .cu files see only this
// header and the plain ones it includes (the loss and optimizer options the
// CPU reads too, the device scalars), which keeps nvcc's work small.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "backends/device_scalars.h"
#include "convoy/backends/loss.h"
#include "convoy/optim/optimizer_options.h"

namespace convoy::cuda {

// True when this build's kernels run on the current device; else sets `why`.
bool kernels_run_here(std::string& why);

// --- elementwise.cu
void relu_forward(const float* x, float* y, int64_t n, cudaStream_t stream);
void relu_backward(const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream);
void add(const float* a, const float* b, float* out, int64_t n, cudaStream_t stream);  // out = a + b
void accumulate(float* out, const float* a, int64_t n, cudaStream_t stream);          // out += a
// y[r, c] += bias[c] over a [rows, cols] matrix.
void add_bias_rows(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);
// out[c] = sum over r of x[r, c] (a dense layer's bias gradient); a fixed order: the same bits every run.
void column_sums(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream);

// --- activations.cu (ReLU6, SiLU, sigmoid as the CPU backend's eltwise ops)
enum class Activation { relu6, silu, sigmoid };
void activation_forward(Activation a, const float* x, float* y, int64_t n, cudaStream_t stream);
void activation_backward(Activation a, const float* x, const float* dy, float* dx, int64_t n, cudaStream_t stream);

// --- gates.cu: x times a mask (dropout) or a gate (multiply), NCHW.
// Dropout draws the CPU backend's masks (dropout_mask.h): element j of
// example n (NCHW) is the CPU's element dropout_cpu_index(j, channels, pixels)
// of the same example, at the step *steps_done (device memory, so captured
// graphs see it advance). The backward pass draws the same mask again.
struct DropoutArgs {
  uint64_t seed = 0;  // the layer's (dropout_layer_seed)
  float rate = 0, keep_scale = 1;
  int64_t batch = 0, example = 0, channels = 0, pixels = 1;
  const int64_t* steps_done = nullptr;
};
void dropout_forward(const DropoutArgs& a, const float* x, float* y, cudaStream_t stream);
void dropout_backward(const DropoutArgs& a, const float* dy, float* dx, cudaStream_t stream);
// y = x * g, g one value per `pixels` consecutive elements of x (a channel of
// an NCHW image; pixels = 1: element-wise), `gates` values in all.
// Backward: dx = dy * g, dg = sum over its pixels of dy * x; dx or dg may be null.
void gate_forward(const float* x, const float* g, float* y, int64_t gates, int64_t pixels, cudaStream_t stream);
void gate_backward(const float* x, const float* g, const float* dy, float* dx, float* dg, int64_t gates,
                   int64_t pixels, cudaStream_t stream);

// --- padding_pools.cu: windows that cuDNN's symmetric padding cannot place
// (TensorFlow's "same" with an odd total: one more row and column at the end).
// Planes are N*C images of h x w; padded ones hold the image at (top, left).
void pad_planes(const float* x, float* padded, int64_t planes, int64_t h, int64_t w, int64_t top, int64_t left,
                int64_t padded_h, int64_t padded_w, cudaStream_t stream);
void crop_planes(const float* padded, float* x, int64_t planes, int64_t h, int64_t w, int64_t top, int64_t left,
                 int64_t padded_h, int64_t padded_w, cudaStream_t stream);
// Pools as the CPU's own kernels (backends/cpu/pool_geometry.h): window
// (oy, ox) covers rows [oy*s - top, oy*s - top + k) clipped to the image, and
// columns likewise. Max: first maximum wins, its window position (a byte,
// k <= 16) is kept for backward. Average: divided by k*k when padding counts,
// else by the window's pixels inside the image. The backward passes gather
// per input pixel, adding the windows' shares in the CPU's order.
struct PoolArgs {
  int64_t planes = 0, h = 0, w = 0, oh = 0, ow = 0, k = 1, s = 1, top = 0, left = 0;
  bool count_include_pad = true;
};
void max_pool_forward(const PoolArgs& p, const float* x, float* y, uint8_t* argmax, cudaStream_t stream);
void max_pool_backward(const PoolArgs& p, const uint8_t* argmax, const float* dy, float* dx, cudaStream_t stream);
void avg_pool_forward(const PoolArgs& p, const float* x, float* y, cudaStream_t stream);
void avg_pool_backward(const PoolArgs& p, const float* dy, float* dx, cudaStream_t stream);

// --- frozen.cu: frozen layers (trainable = false).
// A frozen batch norm's input gradient, as the CPU's: dx = scale[c] * dy with
// scale = gamma / sqrt(running_var + eps) (computed in double, into `scale`,
// C floats). x is [batch, channels, pixels].
void frozen_batch_norm_backward(const float* gamma, const float* running_var, float eps, const float* dy, float* dx,
                                float* scale, int64_t batch, int64_t channels, int64_t pixels, cudaStream_t stream);
// The trainable parameters as one packed buffer: run r is flat
// [runs[r], runs[r] + length) at packed [runs[count + r], ...), the runs
// in order and the last one ending at packed_n. Gather copies flat -> packed,
// scatter packed -> flat.
void gather_runs(const float* flat, float* packed, const int64_t* runs, int64_t count, int64_t packed_n,
                 cudaStream_t stream);
void scatter_runs(const float* packed, float* flat, const int64_t* runs, int64_t count, int64_t packed_n,
                  cudaStream_t stream);

// --- guard.cu: the numerical guard of a training step (see there).
// Before the step: clears its scalars and saves the BN state.
void begin_guarded_step(float* state, float* state_before, int64_t state_n, DeviceScalars* scalars,
                        cudaStream_t stream);
// After backward, before optimizer_step: decides step_ok, commits the metrics
// of a finite step (and counts it in steps_done), puts the BN state back
// after a faulty one.
void finish_guarded_step(const float* grads, int64_t n, float* state, const float* state_before, int64_t state_n,
                         int64_t batch, DeviceScalars* scalars, cudaStream_t stream);

// --- softmax_loss.cu
void log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols, cudaStream_t stream);
void log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                          cudaStream_t stream);

// The loss of the model's output against the targets, as the CPU's
// loss_forward (backends/cpu/softmax_kernels.h): label smoothing, the same
// formulas, d_out = d(mean loss)/d(out) over grad_rows rows. Exactly one of
// labels and dense is set; labels were checked on the host. Optional sinks:
// step_loss (overwritten), loss_sum and correct (added to: the metrics).
struct LossArgs {
  Loss loss = Loss::nll;
  float smoothing = 0;
  const float* out = nullptr;
  const int32_t* labels = nullptr;
  const float* dense = nullptr;
  int64_t rows = 0, cols = 0, grad_rows = 0;
  float* d_out = nullptr;
  double* step_loss = nullptr;
  double* loss_sum = nullptr;
  unsigned long long* correct = nullptr;
};
void loss_forward(const LossArgs& args, cudaStream_t stream);

// --- optimizer.cu
// One update of the flat parameter buffer, as optim::step (optim/optimizer.h):
// global-norm clipping first (the gradients are scaled in place), then one
// fused kernel for the optimizer kind. The learning rate is read from
// scalars->lr (opt.lr is ignored); Adam's step count lives in state[2n] as on
// the CPU. Nothing changes unless scalars->step_ok (the guard's verdict).
void optimizer_step(const optim::OptimizerOptions& opt, float* params, float* grads, float* state, int64_t n,
                    DeviceScalars* scalars, cudaStream_t stream);

}  // namespace convoy::cuda
