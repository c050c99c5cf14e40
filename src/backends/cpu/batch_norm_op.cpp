// Batch normalisation with PyTorch's semantics, our own kernels over the
// activation layout viewed as [rows, C] (NHWC images: rows = N*H*W; vectors:
// rows = N). oneDNN 2.6's NHWC backward took 40% of a seed-CNN step for C=10.
//   training:  y = gamma * (x - mean_B) / sqrt(var_B + eps) + beta, with the
//              batch's biased variance; running stats take the unbiased one:
//              r = (1 - momentum) r + momentum * stat
//   inference: the same with the running mean and variance
//   frozen (trainable = false): inference in training steps too, running
//              statistics untouched, no parameter gradients; dx = scale * dy
// Sums are per thread over fixed row ranges, combined in thread order, in
// double: the same bits for the same thread count.
// Every loop walks the [rows, C] array as flat runs of P floats ("periods",
// a multiple of lcm(C, 8) of at least 256), in which position j always holds
// channel j % C, with the per-channel constants laid out per period: loops
// over C = 10 channels do not vectorise, loops over a period do.
// Synchronised (a StatisticsReducer bound): the per-channel sums of the
// forward (mean, then variance) and of the backward are summed over replicas,
// so every replica normalises over the global batch; gamma and beta keep
// their local gradients, which the gradient mean over replicas completes (as
// PyTorch's SyncBatchNorm).
// Fused ReLU (conv_pool_op.h: a ReLU that is the batch norm's only reader):
// the normalising pass writes the ReLU's output, max(0, y), and the BN's own
// output is never written; the backward pass reads the ReLU's output
// gradient and masks it (relu_math.h) by y, recomputed from x with the
// forward's constants and the same expression (normalised()), so both its
// reductions and its dx pass see the gradient the ReLU's own op would have
// written, bit for bit, without the ReLU's two passes and tensors.
// Fused ReLU and max pool (a ResNet's stem: BN → ReLU → max pool, each the
// only reader of the one before): the normalising pass takes one image at a
// time into a per-thread staging buffer (ReLU'd) and runs the pool's kernels
// on it there (max_pool_kernels.h), so only the pooled output and its window
// positions are written, not the BN's or the ReLU's full-size output (16 MiB
// at batch 64 for ResNet-18 on 64×64 inputs). Backward, each image's ReLU
// output gradient is routed from the pooled one into the staging buffer, by
// the pool's own code, whenever a pass reaches that image (twice: the
// reductions, then dx), and never written out. Every value is the unfused
// ops', bit for bit: the same pool comparisons on the same ReLU outputs, the
// same routed sums, the same per-thread summation order.
// Fused flatten (the seed CNN's BN → flatten, the BN its only reader's input):
// the normalising pass takes one image at a time into the per-thread
// staging buffer and transposes it into the flatten's C-major output
// (planes.h), and the backward passes transpose each image's flat output
// gradient back into the staging buffer whenever a pass reaches that image,
// as the fused pool's routing: the BN's own NHWC output and the flatten's
// two passes over memory go. Data movement only: the same bits.
// Every kernel subtracts the mean before scaling, as PyTorch does: folding it
// into one multiply-add (x * scale + shift) cancels digits when |mean| >> std, and over
// the 16 small-batch batch norms of a ResNet-50 that lost a factor ~10 in accuracy.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "backends/cpu/max_pool_kernels.h"
#include "backends/cpu/ops.h"
#include "backends/cpu/planes.h"
#include "backends/cpu/relu_math.h"

namespace convoy::cpu {
namespace {

// The forward's y, one expression for the forward pass and the fused ReLU's
// recomputation, so both round (and contract) it alike.
inline float normalised(float x, float center, float scale, float shift) { return (x - center) * scale + shift; }

class BatchNormOp final : public CpuOp {
 public:
  // relu: the fused ReLU's buffers (bound after this op), or null; pool and
  // pooling: the fused max pool's after it, or null; flat: the fused
  // flatten's (no ReLU or pool then), or null.
  BatchNormOp(const nn::BatchNorm& bn, const Shape& shape, bool trainable, std::shared_ptr<const OpBuffers> relu,
              std::shared_ptr<const OpBuffers> pool, std::unique_ptr<const MaxPoolKernels> pooling,
              std::shared_ptr<const OpBuffers> flat = nullptr)
      : bn_(bn), trainable_(trainable), relu_(std::move(relu)), pool_(std::move(pool)), pooling_(std::move(pooling)),
        flat_(std::move(flat)),
        c_(shape[1]), rows_(numel(shape) / shape[1]), period_(period_of(c_)),
        threads_(omp_get_max_threads()), partial_(static_cast<std::size_t>(threads_ * period_ * 2)), mean_(period_),
        invstd_(c_), sum_a_(c_), sum_b_(c_), scale_(period_), center_(period_), shift_(period_), k_dy_(period_),
        k_x_(period_), mean_dy_(period_), synced_(static_cast<std::size_t>(2 * c_ + 1)),
        piece_(pooling_ ? pooling_->image_size() : flat_ ? numel(shape) / shape[0] : rows_ * c_) {
    if (pooling_) positions_.resize(static_cast<std::size_t>(rows_ * c_ / piece_ * pooling_->pooled_size()));
    if (pooling_ || flat_) staged_.resize(static_cast<std::size_t>(threads_ * piece_));
  }

  void bind(DnnlEnv&, const OpBuffers& b) override {
    b_ = b;
    if (!trainable_) std::fill_n(b_.grads, 2 * c_, 0.0f);
  }

  void forward(DnnlEnv&, bool training) override {
    const float *gamma = b_.params, *beta = b_.params + c_;
    float *running_mean = b_.state, *running_var = b_.state + c_;
    if (training && trainable_) {
      // Two passes (mean, then centred squares) for accuracy.
      const float* x = b_.src;
      reduce([x](int64_t i, int64_t, double* a, double*) { a[0] += x[i]; });
      count_ = static_cast<double>(rows_);
      if (synchronised()) count_ = sum_over_replicas(1);
      for (int64_t j = 0; j < period_; ++j) mean_[j] = sum_a_[j % c_] / count_;
      const double* mean = mean_.data();
      reduce([x, mean](int64_t i, int64_t j, double* a, double*) {
        const double d = x[i] - mean[j];
        a[0] += d * d;
      });
      if (synchronised()) sum_over_replicas(1);
      const double unbias = count_ > 1 ? count_ / (count_ - 1) : 1.0;
      const double m = bn_.momentum;
      for (int64_t c = 0; c < c_; ++c) {
        const double var = sum_a_[c] / count_;
        invstd_[c] = 1.0 / std::sqrt(var + bn_.eps);
        running_mean[c] = static_cast<float>((1 - m) * running_mean[c] + m * mean_[c]);
        running_var[c] = static_cast<float>((1 - m) * running_var[c] + m * var * unbias);
      }
      for (int64_t j = 0; j < period_; ++j) {
        const int64_t c = j % c_;
        scale_[j] = static_cast<float>(gamma[c] * invstd_[c]);
        center_[j] = static_cast<float>(mean_[j]);
        shift_[j] = beta[c];
      }
    } else {
      for (int64_t j = 0; j < period_; ++j) {
        const int64_t c = j % c_;
        const double inv = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + bn_.eps);
        scale_[j] = static_cast<float>(gamma[c] * inv);
        center_[j] = running_mean[c];
        shift_[j] = beta[c];
      }
    }
    const float *x = b_.src, *scale = scale_.data(), *center = center_.data(), *shift = shift_.data();
    if (pooling_) {
      const int64_t pooled = pooling_->pooled_size();
      for_each_piece(piece_, [=, this](int t, int64_t first, int64_t end) {
        float* z = staged(t);
        over_runs(first, end, 0, [=](int64_t i, int64_t j) {
          z[i - first] = relu_forward(normalised(x[i], center[j], scale[j], shift[j]));
        });
        const int64_t n = first / piece_;
        pooling_->max_image(z, pool_->dst + n * pooled, positions_.data() + n * pooled);
      });
    } else if (flat_) {
      const int64_t pixels = piece_ / c_;
      float* y = flat_->dst;
      for_each_piece(piece_, [=, this](int t, int64_t first, int64_t end) {
        float* z = staged(t);
        over_runs(first, end, 0,
                  [=](int64_t i, int64_t j) { z[i - first] = normalised(x[i], center[j], scale[j], shift[j]); });
        transpose(z, c_, pixels, c_, y + first, pixels);  // [pixel][channel] to [channel][pixel]
      });
    } else if (relu_) {
      float* y = relu_->dst;
      for_each_period(
          [=](int64_t i, int64_t j) { y[i] = relu_forward(normalised(x[i], center[j], scale[j], shift[j])); });
    } else {
      float* y = b_.dst;
      for_each_period([=](int64_t i, int64_t j) { y[i] = normalised(x[i], center[j], scale[j], shift[j]); });
    }
  }

  void backward(DnnlEnv&) override {
    if (!relu_) return backward_from([](int64_t i, int64_t, Run r) { return r.dy[i - r.first]; });
    const float *x = b_.src, *scale = scale_.data(), *center = center_.data(), *shift = shift_.data();
    backward_from([=](int64_t i, int64_t j, Run r) {
      return relu_backward(normalised(x[i], center[j], scale[j], shift[j]), r.dy[i - r.first]);
    });
  }

 private:
  // The output gradient (the fused ReLU's when there is one) of a piece's
  // elements: element i's at dy[i - first].
  struct Run {
    const float* dy;
    int64_t first;
  };

  // Thread t's staging buffer: one image.
  float* staged(int t) { return staged_.data() + static_cast<std::size_t>(t) * static_cast<std::size_t>(piece_); }

  // The output gradient of the piece holding element i, for thread t: with
  // a fused pool, that image's ReLU output gradient, routed into t's staging
  // buffer from the pooled gradient; with a fused flatten, that image's,
  // transposed back from the flat gradient into t's staging buffer; else the
  // whole tensor's, as bound.
  Run gradient_of(int t, int64_t i) {
    if (!pooling_ && !flat_) return {relu_ ? relu_->diff_dst : b_.diff_dst, 0};
    const int64_t n = i / piece_;
    float* g = staged(t);
    if (flat_) {
      const int64_t pixels = piece_ / c_;
      transpose(flat_->diff_dst + n * piece_, pixels, c_, pixels, g, c_);  // [channel][pixel] to [pixel][channel]
      return {g, n * piece_};
    }
    const int64_t pooled = pooling_->pooled_size();
    pooling_->route_image(pool_->diff_dst + n * pooled, positions_.data() + n * pooled, g);
    return {g, n * piece_};
  }

  // The backward pass given dy(i, j, run): the output gradient at flat index
  // i, position j in its period, from the run gradient_of gave for i's piece.
  template <class Dy> void backward_from(Dy dy) {
    if (!trainable_) return frozen_backward(dy);
    // sum_a = sum dy (d beta); sum_b = sum dy * (x - mean) (d gamma / invstd)
    const float* x = b_.src;
    const double* mean = mean_.data();
    reduce([x, dy, mean](int64_t i, int64_t j, double* a, double* b, Run r) {
      const double d = dy(i, j, r);
      a[0] += d;
      b[0] += d * (x[i] - mean[j]);
    });
    const float* gamma = b_.params;
    for (int64_t c = 0; c < c_; ++c) {
      b_.grads[c] = static_cast<float>(sum_b_[c] * invstd_[c]);
      b_.grads[c_ + c] = static_cast<float>(sum_a_[c]);
    }
    if (!b_.diff_src) return;
    if (synchronised()) sum_over_replicas(2);
    // dx = gamma*invstd * (dy - sum_a/M - (x-mean)*invstd^2 * sum_b/M)
    //    = k_dy * (dy - mean_dy) + k_x * (x - mean)
    for (int64_t j = 0; j < period_; ++j) {
      const int64_t c = j % c_;
      const double g = gamma[c] * invstd_[c];
      const double kx = -g * invstd_[c] * invstd_[c] * sum_b_[c] / count_;
      k_dy_[j] = static_cast<float>(g);
      k_x_[j] = static_cast<float>(kx);
      mean_dy_[j] = static_cast<float>(sum_a_[c] / count_);
    }
    const float *a = k_dy_.data(), *bx = k_x_.data(), *mdy = mean_dy_.data(), *center = center_.data();
    float* dx = b_.diff_src;
    for_each_gradient_run([=](int64_t i, int64_t j, Run r) {
      dx[i] = a[j] * (dy(i, j, r) - mdy[j]) + bx[j] * (x[i] - center[j]);
    });
  }

  static int64_t period_of(int64_t channels) {
    const int64_t l = std::lcm(channels, int64_t{8});
    return l * ((256 + l - 1) / l);
  }

  bool synchronised() const { return b_.reduce_statistics && *b_.reduce_statistics; }

  // Sums sum_a_ (and with arrays == 2, sum_b_) and this batch's row count over
  // all replicas in place; returns the global row count.
  double sum_over_replicas(int arrays) {
    const std::size_t c = static_cast<std::size_t>(c_), n = c * arrays;
    std::copy(sum_a_.begin(), sum_a_.end(), synced_.begin());
    if (arrays == 2) std::copy(sum_b_.begin(), sum_b_.end(), synced_.begin() + c);
    synced_[n] = static_cast<double>(rows_);
    (*b_.reduce_statistics)({synced_.data(), n + 1});
    std::copy(synced_.begin(), synced_.begin() + c, sum_a_.begin());
    if (arrays == 2) std::copy(synced_.begin() + c, synced_.begin() + n, sum_b_.begin());
    return synced_[n];
  }

  template <class Dy> void frozen_backward(Dy dy) {
    if (!b_.diff_src) return;
    const float* scale = scale_.data();
    float* dx = b_.diff_src;
    for_each_gradient_run([=](int64_t i, int64_t j, Run r) { dx[i] = scale[j] * dy(i, j, r); });
  }

  // Runs fn(i, j) over elements [first, end), j = (i - origin) % P: i's
  // position in its period when periods start at origin, in runs that end
  // where a period does, so the loops over a run vectorise.
  template <class Fn> void over_runs(int64_t first, int64_t end, int64_t origin, Fn fn) const {
    int64_t j = (first - origin) % period_;
    for (int64_t i = first; i < end; j = 0) {
      const int64_t count = std::min(period_ - j, end - i);
      for (int64_t k = 0; k < count; ++k) fn(i + k, j + k);
      i += count;
    }
  }

  // Runs fn(thread, first, end) over the elements in pieces of `piece`
  // ([first, end), the last one possibly short), across the threads.
  template <class Fn> void for_each_piece(int64_t piece, Fn fn) {
    const int64_t size = rows_ * c_, pieces = (size + piece - 1) / piece;
#pragma omp parallel for schedule(static) num_threads(threads_)
    for (int64_t p = 0; p < pieces; ++p) fn(omp_get_thread_num(), p * piece, std::min(size, (p + 1) * piece));
  }

  // Runs fn(flat index, position in its period) over all elements, a period
  // at a time, across the threads.
  template <class Fn> void for_each_period(Fn fn) {
    for_each_piece(period_, [&](int, int64_t first, int64_t end) { over_runs(first, end, first, fn); });
  }

  // Runs fn(i, j, run) over all elements, run: gradient_of's for i's piece
  // (a period at a time without a fused pool or flatten, an image at a time
  // with one).
  template <class Fn> void for_each_gradient_run(Fn fn) {
    for_each_piece(pooling_ || flat_ ? piece_ : period_, [&](int t, int64_t first, int64_t end) {
      const Run r = gradient_of(t, first);
      over_runs(first, end, first, [&](int64_t i, int64_t j) { fn(i, j, r); });
    });
  }

  // Runs fn(flat index i, position j in its period, &a[j], &b[j]) (and, when
  // fn takes a fifth argument, gradient_of's run for i's piece) over all
  // elements, each thread over a fixed range of rows into its own
  // accumulators a and b (a period of doubles each), then sums them per
  // channel, in period then thread order, into sum_a_ and sum_b_. A thread
  // walks its range in order, piece by piece, so each accumulator sums the
  // same values in the same order with or without a fused pool.
  template <class Fn> void reduce(Fn fn) {
    std::fill(partial_.begin(), partial_.end(), 0.0);
    const int64_t rows = rows_, cols = c_, period = period_, piece = piece_;
#pragma omp parallel num_threads(threads_)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      // A range starts on a row, so position j of each period is channel j % C.
      const int64_t begin = rows * t / nt * cols, end = rows * (t + 1) / nt * cols;
      double* a = partial_.data() + static_cast<std::size_t>(t) * 2 * period;
      double* b = a + period;
      for (int64_t first = begin; first < end;) {
        const int64_t last = std::min(end, (first / piece + 1) * piece);
        if constexpr (std::is_invocable_v<Fn, int64_t, int64_t, double*, double*, Run>) {
          const Run r = gradient_of(t, first);
          over_runs(first, last, begin, [&](int64_t i, int64_t j) { fn(i, j, a + j, b + j, r); });
        } else {
          over_runs(first, last, begin, [&](int64_t i, int64_t j) { fn(i, j, a + j, b + j); });
        }
        first = last;
      }
    }
    std::fill(sum_a_.begin(), sum_a_.end(), 0.0);
    std::fill(sum_b_.begin(), sum_b_.end(), 0.0);
    for (int t = 0; t < threads_; ++t)
      for (int64_t j = 0; j < period; ++j) {
        sum_a_[j % cols] += partial_[static_cast<std::size_t>(t * 2 * period + j)];
        sum_b_[j % cols] += partial_[static_cast<std::size_t>(t * 2 * period + period + j)];
      }
  }

  nn::BatchNorm bn_;
  bool trainable_;
  std::shared_ptr<const OpBuffers> relu_, pool_;
  std::unique_ptr<const MaxPoolKernels> pooling_;  // the fused pool's kernels, or null
  std::shared_ptr<const OpBuffers> flat_;          // the fused flatten's buffers, or null
  int64_t c_, rows_;
  int64_t period_;  // the per-period arrays below hold channel j % C at j
  int threads_;
  std::vector<double> partial_;
  std::vector<double> mean_;                   // per period
  std::vector<double> invstd_, sum_a_, sum_b_;  // per channel; the last training batch's statistics
  std::vector<float> scale_, center_, shift_;  // per period; forward: y = (x - center) * scale + shift
  std::vector<float> k_dy_, k_x_, mean_dy_;    // per period; backward: dx = k_dy * (dy - mean_dy) + k_x * (x - center)
  double count_ = 0;            // rows the last training batch's statistics cover (all replicas' when synced)
  std::vector<double> synced_;  // staging for the replicas' sums: 2C sums and a count
  int64_t piece_;               // elements per piece: an image with a fused pool or flatten, else all
  std::vector<uint8_t> positions_;  // the fused pool's window position of each output's maximum
  std::vector<float> staged_;       // per thread: one image's ReLU or BN output, or its gradient
  OpBuffers b_;
};

}  // namespace

std::unique_ptr<CpuOp> make_batch_norm(const nn::LayerPlan& plan, const Shape& shape,
                                       std::shared_ptr<const OpBuffers> relu) {
  return std::make_unique<BatchNormOp>(std::get<nn::BatchNorm>(plan.layer), shape, plan.trainable, std::move(relu),
                                       nullptr, nullptr);
}

std::unique_ptr<CpuOp> make_batch_norm_relu_pool(const nn::LayerPlan& plan, const Shape& shape,
                                                 std::shared_ptr<const OpBuffers> relu,
                                                 const nn::LayerPlan& pool_plan, const Shape& pooled,
                                                 std::shared_ptr<const OpBuffers> pool) {
  const auto& p = std::get<nn::MaxPool2d>(pool_plan.layer);
  auto pooling = std::make_unique<const MaxPoolKernels>(
      PoolGeometry(shape, pooled, p.kernel, p.stride, p.padding, pool_plan.name));
  return std::make_unique<BatchNormOp>(std::get<nn::BatchNorm>(plan.layer), shape, plan.trainable, std::move(relu),
                                       std::move(pool), std::move(pooling));
}

std::unique_ptr<CpuOp> make_batch_norm_flatten(const nn::LayerPlan& plan, const Shape& shape,
                                               std::shared_ptr<const OpBuffers> flat) {
  return std::make_unique<BatchNormOp>(std::get<nn::BatchNorm>(plan.layer), shape, plan.trainable, nullptr, nullptr,
                                       nullptr, std::move(flat));
}

}  // namespace convoy::cpu
