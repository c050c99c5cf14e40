#include "backends/batch_slices.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "backends/buffer_sizes.h"
#include "backends/program.h"
#include "backends/slice_group.h"
#include "backends/targets.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"
#include "convoy/nn/layers.h"

namespace convoy {
namespace {

// A slice below this many examples leaves the single-threaded kernels short
// rows to vectorise and block over, and batch norm over it noisy to check.
constexpr int64_t kMinSliceRows = 16;

// Above this many FLOPs per step and thread in one layer, splitting the op
// over the threads costs little: a per-op barrier is ~1-5 us, a step of the
// seed CNN has ~30 of them, and its largest layer (the second convolution,
// ~0.25 GFLOP per step at batch 128, forward and backward) is split 2 ways
// into ~0.12 GFLOP, ~1 ms. Measured (docs/benchmarks.md, Xeon AVX-512, 2
// cores, seed CNN): slices 1.9x over one thread against per_op's 1.5x.
// Layers 4x larger than the seed's run ~4 ms per thread and more, where
// per-op splitting is efficient already and the slices' extra copies of
// weights and optimizer state are no longer free: such models stay per_op.
constexpr double kMaxLayerFlopsPerThread = 0.5e9;

// The largest divisor of `batch` that is at most `threads`.
int64_t divisor_up_to(int64_t batch, int threads) {
  for (int64_t k = std::min<int64_t>(threads, batch); k > 1; --k)
    if (batch % k == 0) return k;
  return 1;
}

// Sets OpenMP's thread count for this thread until destroyed.
class ThreadsFor {
 public:
  explicit ThreadsFor(int n) : before_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~ThreadsFor() { omp_set_num_threads(before_); }
  ThreadsFor(const ThreadsFor&) = delete;
  ThreadsFor& operator=(const ThreadsFor&) = delete;

 private:
  int before_;
};

class BatchSlices final : public Executable, public ExecutableInternals {
 public:
  BatchSlices(const nn::Model& model, const CompileOptions& options, uint64_t seed, int64_t slices,
              const std::function<std::unique_ptr<Device>()>& make_device)
      : options_(options), slices_(slices), rows_(options.batch_size / slices),
        group_(static_cast<int>(slices)) {
    CompileOptions one = options;
    one.batch_size = rows_;
    {
      // Every op is built for one thread (oneDNN's primitives and our kernels
      // size their work by the thread count they see when made).
      const ThreadsFor single(1);
      for (int64_t k = 0; k < slices_; ++k)
        slices_of_.push_back(std::make_unique<Program>(
            model, one, seed, make_device(), BatchSlice{.first_example = k * rows_, .of_batch = options.batch_size}));
    }
    for (int64_t k = 0; k < slices_; ++k) {
      slices_of_[k]->set_gradient_reducer(group_.gradient_reducer(static_cast<int>(k)));
      slices_of_[k]->set_batch_norm_reducer(group_.statistics_reducer(static_cast<int>(k)));
    }
    compiled_for_ = first().compiled_for();
    compiled_for_.batch_size = options.batch_size;
  }

  const CompiledFor& compiled_for() const override { return compiled_for_; }
  ExecutableInternals& internals() override { return *this; }
  int64_t batch_slices() const override { return slices_; }

  void train_step(const float* x, Targets y) override {
    // User errors here, not on the slices' threads.
    check_targets(options_.loss, y, compiled_for_.batch_size, compiled_for_.output_size);
    on_slices([&](int64_t k, Program& p) { p.train_step(slice_x(x, k), slice_y(y, k)); });
    // Every slice's guard saw the same averaged gradients; one that decided
    // otherwise (a non-finite loss with finite gradients) trained its weights apart.
    const bool finite = first().last_step_finite();
    for (const auto& p : slices_of_)
      if (p->last_step_finite() != finite)
        throw std::logic_error("batch slices: the slices' numerical guards disagreed; use training.parallelism per_op");
    collect_metrics();
  }

  void eval_step(const float* x, Targets y, int64_t count) override {
    require_eval_count(count, compiled_for_.batch_size);
    check_targets(options_.loss, y, count, compiled_for_.output_size);
    on_slices([&](int64_t k, Program& p) {
      const int64_t rows = std::clamp<int64_t>(count - k * rows_, 0, rows_);
      if (rows > 0) p.eval_step(slice_x(x, k), slice_y(y, k), rows);
    });
    collect_metrics();
  }

  // The mean of the slices' mean losses: the whole batch's (equal slices).
  double loss_and_gradients(const float* x, Targets y) override {
    check_targets(options_.loss, y, compiled_for_.batch_size, compiled_for_.output_size);
    std::vector<double> loss(static_cast<std::size_t>(slices_));
    on_slices([&](int64_t k, Program& p) { loss[static_cast<std::size_t>(k)] = p.loss_and_gradients(slice_x(x, k), slice_y(y, k)); });
    double sum = 0;
    for (double l : loss) sum += l;
    return sum / static_cast<double>(slices_);
  }

  Metrics metrics(Metrics::Then then) override {
    return then == Metrics::reset ? std::exchange(metrics_, Metrics{}) : metrics_;
  }
  void restore_metrics(const Metrics& m) override { metrics_ = m; }
  void set_steps_done(int64_t steps) override {
    for (auto& p : slices_of_) p->set_steps_done(steps);
  }
  bool last_step_finite() const override { return first().last_step_finite(); }
  std::string nonfinite_report() const override {
    for (const auto& p : slices_of_)
      if (std::string r = p->nonfinite_report(); !r.empty()) return r;
    return "";
  }

  void set_learning_rate(float lr) override {
    for (auto& p : slices_of_) p->set_learning_rate(lr);
  }
  float learning_rate() const override { return first().learning_rate(); }

  // Slice 0's times (its thread's share of each step), with the whole batch's FLOPs.
  void set_profiling(bool on) override {
    for (auto& p : slices_of_) p->set_profiling(on);
  }
  std::vector<LayerProfile> profile() const override {
    std::vector<LayerProfile> layers = first().profile();
    for (auto& l : layers) {
      l.forward_flops *= static_cast<double>(slices_);
      l.backward_flops *= static_cast<double>(slices_);
    }
    return layers;
  }
  int64_t profiled_steps() const override { return first().profiled_steps(); }

  // Every slice holds the same weights, state and optimizer state (and
  // gradients: their mean): set all, read one. Outputs and input gradients
  // are the slices' rows in order.
  int64_t size(Held held) const override {
    const bool rows = held == Held::output || held == Held::input_gradient;
    return first().size(held) * (rows ? slices_ : 1);
  }
  void write(Held held, std::span<const float> v) override {
    for (auto& p : slices_of_) p->write(held, v);
  }
  void read(Held held, std::span<float> v) const override {
    if (held != Held::output && held != Held::input_gradient) return first().read(held, v);
    const int64_t per = first().size(held);
    require_room(v.size(), per * slices_, held_name(held));
    for (int64_t k = 0; k < slices_; ++k) slices_of_[k]->read(held, v.subspan(k * per, per));
    // Each slice's input gradient is of its own mean loss, K times the whole batch's.
    if (held == Held::input_gradient)
      for (float& x : v) x /= static_cast<float>(slices_);
  }

  void set_gradient_reducer(GradientReducer* reducer) override { group_.set_outer(reducer); }
  void set_batch_norm_reducer(StatisticsReducer reducer) override { group_.set_outer_statistics(std::move(reducer)); }

 private:
  const Program& first() const { return *slices_of_.front(); }
  const float* slice_x(const float* x, int64_t k) const { return x + k * rows_ * compiled_for_.input_size; }
  Targets slice_y(Targets y, int64_t k) const {
    if (y.dense) return Targets::rows(y.dense + k * rows_ * compiled_for_.output_size);
    return Targets(y.labels + k * rows_);
  }

  // fn(k, slice k) on K threads at once, each running its ops alone. An
  // exception on one thread stops the others at their next rendezvous; the
  // first is rethrown here (the slices may then differ: the step is lost).
  template <class Fn> void on_slices(Fn fn) {
    require(!omp_in_parallel(), "batch slices: a step cannot run inside another parallel region; "
                                "use training.parallelism per_op");
    group_.reset();
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(slices_));
    bool short_team = false;
#pragma omp parallel num_threads(static_cast<int>(slices_))
    {
      const int k = omp_get_thread_num();
      if (omp_get_num_threads() != slices_) {
#pragma omp single
        short_team = true;
      } else {
        omp_set_num_threads(1);  // this thread's nested regions (our kernels, oneDNN): itself alone
        try {
          fn(k, *slices_of_[static_cast<std::size_t>(k)]);
        } catch (const SliceAborted&) {
        } catch (...) {
          errors[static_cast<std::size_t>(k)] = std::current_exception();
          group_.barrier().abort();
        }
      }
    }
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);
    if (short_team)
      throw UserError("batch slices: OpenMP gave fewer than " + std::to_string(slices_) +
                      " threads (OMP_THREAD_LIMIT or OMP_DYNAMIC?); use training.parallelism per_op");
  }

  // The step's sums join the running ones here, slice by slice: a resumed
  // run that restores the running sums continues with the same additions.
  void collect_metrics() {
    Metrics step;
    for (auto& p : slices_of_) {
      const Metrics m = p->metrics(Metrics::reset);
      step.loss_sum += m.loss_sum;
      step.correct += m.correct;
      step.count += m.count;
    }
    metrics_.loss_sum += step.loss_sum;
    metrics_.correct += step.correct;
    metrics_.count += step.count;
  }

  CompileOptions options_;
  int64_t slices_, rows_;
  SliceGroup group_;
  std::vector<std::unique_ptr<Program>> slices_of_;
  CompiledFor compiled_for_;
  Metrics metrics_;
};

}  // namespace

int64_t choose_batch_slices(const nn::Model& model, const CompileOptions& options, int threads) {
  if (options.parallelism == Parallelism::per_op) return 1;
  const int64_t batch = options.batch_size;
  if (options.parallelism == Parallelism::batch_slices) return divisor_up_to(batch, threads);
  // The most slices that leave each kMinSliceRows rows.
  const int64_t k = divisor_up_to(batch, static_cast<int>(std::min<int64_t>(threads, batch / kMinSliceRows)));
  if (k == 1) return 1;
  for (const auto& layer : model.layers()) {
    const nn::LayerFlops f = nn::layer_flops(layer);
    if ((f.forward + f.backward) * static_cast<double>(batch) / static_cast<double>(k) > kMaxLayerFlopsPerThread)
      return 1;
  }
  return k;
}

std::unique_ptr<Executable> make_batch_slices(const nn::Model& model, const CompileOptions& options, uint64_t seed,
                                              int64_t slices,
                                              const std::function<std::unique_ptr<Device>()>& make_device) {
  require(slices >= 2 && options.batch_size % slices == 0,
          "batch slices: " + std::to_string(slices) + " slices do not divide the batch of " +
              std::to_string(options.batch_size));
  return std::make_unique<BatchSlices>(model, options, seed, slices, make_device);
}

}  // namespace convoy
