// The CPU device: host memory, oneDNN primitives and convoy's own kernels
// behind the device contract (backends/device.h). Work runs at once, so the
// "stream" is the calling thread. The input and the input gradient are the
// only places where the callers' NCHW layout and the ops' activation layout
// (NHWC for images) meet: reorders at the edges.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "backends/cpu/backend_entry.h"
#include "backends/cpu/conv_pool_op.h"
#include "backends/cpu/cpu_op.h"
#include "backends/cpu/finite_check.h"
#include "backends/cpu/softmax_kernels.h"
#include "backends/device.h"
#include "convoy/core/error.h"
#include "convoy/core/memory.h"

namespace convoy::cpu {
namespace {

class CpuDevice final : public Device {
 public:
  CpuDevice(const CompileOptions& options, bool fuse)
      : conv_algo_(options.conv_algo), input_gradient_(options.input_gradient), fuse_(fuse) {
    if (options.precision == Precision::bf16) env_.compute = dnnl::memory::data_type::bf16;  // compile_cpu checked the CPU
  }
  std::string name() const override { return "cpu"; }
  int64_t steps_per_call(const CompileOptions&) const override { return 1; }

  void make_ops(const nn::Model& model, const DeviceShape& shape, const std::vector<uint64_t>& seeds) override {
    shape_ = shape;
    require_memory_for_batch(model);
    CpuOps made = make_cpu_ops(env_, model, shape.batch, seeds, conv_algo_, input_gradient_, fuse_);
    ops_ = std::move(made.ops);
    runs_in_ = std::move(made.runs_in);
  }
  bool is_view(std::size_t layer) const override { return ops_[layer]->is_view(); }
  int runs_in(std::size_t layer) const override { return runs_in_[layer]; }
  int64_t align_floats() const override { return 16; }

  std::vector<void*> allocate(const std::vector<Region>& regions) override {
    std::vector<void*> at;
    for (const Region& r : regions) {
      memory_.emplace_back(static_cast<int64_t>(r.bytes / sizeof(float) + 1));
      at.push_back(memory_.back().data());  // AlignedBuffer zeroes
    }
    std::size_t scratch_bytes = 0;
    for (const auto& op : ops_) scratch_bytes = std::max(scratch_bytes, op->scratchpad_bytes());
    scratch_ = AlignedBuffer(static_cast<int64_t>(scratch_bytes / sizeof(float) + 1));
    return at;
  }

  void bind_edges(float* input, float* d_input) override {
    const int64_t n = shape_.batch, example = numel(shape_.input);
    const Shape in_shape = with_batch(n, shape_.input);
    const bool relayout = in_shape.size() == 4 && in_shape[1] > 1;
    staging_ = AlignedBuffer(relayout ? n * example : 0);
    input_ = relayout ? staging_.data() : input;
    if (relayout)
      input_relayout_ = Prim::reorder(env_, plain_desc(in_shape), input_, activation_desc(in_shape), input);
    d_input_ = d_input;
    if (d_input && relayout) {
      d_input_canonical_ = AlignedBuffer(n * example);
      d_input_relayout_ =
          Prim::reorder(env_, activation_desc(in_shape), d_input, plain_desc(in_shape), d_input_canonical_.data());
    }
  }

  void bind(std::size_t layer, OpBuffers b) override {
    b.scratchpad = scratch_.data();
    b.reduce_statistics = &statistics_reducer_;
    ops_[layer]->bind(env_, b);
  }

  void to_device(void* dst, const void* src, std::size_t bytes) override { copy_bytes(dst, src, bytes); }
  void to_host(void* dst, const void* src, std::size_t bytes) const override { copy_bytes(dst, src, bytes); }
  void zero(void* dst, std::size_t bytes) override { zero_bytes(dst, bytes); }
  bool all_finite(const float* values, int64_t n) const override {
    return cpu::all_finite({values, static_cast<std::size_t>(n)});
  }

  // The batches stay where the caller has them: work runs before stage's
  // caller returns, so no copy is needed.
  int stage(const float* x, Targets y, int64_t, int64_t) override {
    x_ = x;
    y_ = y;
    return 0;
  }
  Slot slot(int, int64_t i) const override {
    const int64_t b = shape_.batch;
    return {.x = x_ + i * b * numel(shape_.input), .labels = y_.labels ? y_.labels + i * b : nullptr,
            .dense = y_.dense ? y_.dense + i * b * shape_.classes : nullptr};
  }
  void release(int) override {}

  void load_input(const float* x, int64_t rows) override {
    const int64_t example = numel(shape_.input);
    copy_bytes(input_, x, sizeof(float) * rows * example);
    std::fill(input_ + rows * example, input_ + shape_.batch * example, 0.0f);
    if (input_relayout_) input_relayout_.run(env_);
  }

  void read_input_gradient(std::span<float> out) const override {
    if (d_input_relayout_) d_input_relayout_.run(env_);
    const float* from = d_input_relayout_ ? d_input_canonical_.data() : d_input_;
    std::copy(from, from + out.size(), out.begin());
  }

  void forward(std::size_t layer, bool training) override { ops_[layer]->forward(env_, training); }
  void backward(std::size_t layer) override { ops_[layer]->backward(env_); }

  void loss(const LossCall& c) override {
    const Targets targets = c.targets.dense ? Targets::rows(c.targets.dense) : Targets(c.targets.labels);
    const LossResult r = loss_forward(c.loss, c.smoothing, c.out, targets, c.rows, c.cols, c.d_out, c.grad_rows);
    if (c.step_loss) *c.step_loss = r.loss_sum;
    if (c.loss_sum) *c.loss_sum += r.loss_sum;
    if (c.correct) *c.correct += static_cast<unsigned long long>(r.correct);
  }

  // The gradient at a fork, summed a block of kSumBlock floats at a time over
  // every part while the block is in L1: one pass over memory, not one per
  // part (ResNet-18's forks, 2 parts of up to 4 MiB at batch 64: 1.0 ms a
  // step less at 1 thread). Each element's additions are the same, in the
  // same order (part 0 + part 1, then + part 2, ...): the same bits.
  void sum(float* into, const std::vector<const float*>& parts, int64_t n) override {
    constexpr int64_t kSumBlock = 2048;
    const int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
    const float *first = parts[0], *second = parts[1];  // at least two (device.h)
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t i0 = b * kSumBlock, i1 = std::min(n, i0 + kSumBlock);
#pragma omp simd
      for (int64_t i = i0; i < i1; ++i) into[i] = first[i] + second[i];
      for (std::size_t k = 2; k < parts.size(); ++k) {
        const float* p = parts[k];
#pragma omp simd
        for (int64_t i = i0; i < i1; ++i) into[i] += p[i];
      }
    }
  }

  void begin_guarded_step(float* state, float* state_before, int64_t state_n, DeviceScalars* s) override {
    convoy::begin_guarded_step(s);
    std::copy(state, state + state_n, state_before);
  }

  void finish_guarded_step(const float* grads, int64_t n, float* state, const float* state_before, int64_t state_n,
                           int64_t batch, DeviceScalars* s) override {
    s->nonfinite = !cpu::all_finite({grads, static_cast<std::size_t>(n)});
    commit_guarded_step(s, batch);
    if (!s->step_ok) std::copy(state_before, state_before + state_n, state);
  }

  void optimizer_step(const optim::OptimizerOptions& opt, float* params, float* grads, float* state, int64_t n,
                      DeviceScalars* s) override {
    if (!s->step_ok) return;
    optim::OptimizerOptions o = opt;
    o.lr = s->lr;
    const auto size = static_cast<std::size_t>(n);
    optim::step(o, {params, size}, {grads, size}, {state, static_cast<std::size_t>(optim::state_size(o, n))});
  }

  void gather_runs(const float* flat, float* packed, const int64_t* runs, int64_t count, int64_t packed_n) override {
    for (int64_t r = 0; r < count; ++r) {
      const int64_t end = r + 1 < count ? runs[count + r + 1] : packed_n;
      std::copy(flat + runs[r], flat + runs[r] + (end - runs[count + r]), packed + runs[count + r]);
    }
  }
  void scatter_runs(const float* packed, float* flat, const int64_t* runs, int64_t count, int64_t packed_n) override {
    for (int64_t r = 0; r < count; ++r) {
      const int64_t end = r + 1 < count ? runs[count + r + 1] : packed_n;
      std::copy(packed + runs[count + r], packed + end, flat + runs[r]);
    }
  }

  void prepare_marks(std::size_t count) override { marks_.assign(count, {}); }
  void mark(std::size_t k) override { marks_[k] = Clock::now(); }
  std::vector<double> mark_seconds() override {
    std::vector<double> s;
    for (std::size_t k = 0; k + 1 < marks_.size(); ++k)
      s.push_back(std::chrono::duration<double>(marks_[k + 1] - marks_[k]).count());
    return s;
  }

  // Any host reducer will do (the MPI strategy's).
  void accept_gradient_reducer(GradientReducer*) override {}
  void set_batch_norm_reducer(StatisticsReducer reducer, GradientReducer*) override {
    statistics_reducer_ = std::move(reducer);
  }

 private:
  using Clock = std::chrono::steady_clock;

  // Fails with a clear message before any primitive or arena is made for a
  // batch the machine cannot hold: every layer's output and its gradient,
  // plus the input twice (staging), in floating point so no size overflows
  // (nn::activation_floats, which the check before training counts too).
  void require_memory_for_batch(const nn::Model& model) const {
    const double bytes = nn::activation_floats(model) * sizeof(float) * static_cast<double>(shape_.batch);
    const int64_t available = available_memory_bytes();
    constexpr double kNoMachineHasThat = 1e15;  // bytes; also keeps every later size product in range
    if (bytes <= kNoMachineHasThat && (available < 0 || bytes <= static_cast<double>(available))) return;
    throw UserError("batch size " + std::to_string(shape_.batch) + " needs " +
                    human_bytes(static_cast<int64_t>(std::min(bytes, 9e18))) +
                    " for activations and gradients, but only " +
                    (available < 0 ? std::string("less") : human_bytes(available)) +
                    " of memory is available; use a smaller --batch-size");
  }

  ConvAlgo conv_algo_;
  bool input_gradient_, fuse_;
  std::vector<int> runs_in_;  // per layer: the layer whose op does its work (conv_pool_op.h), or -1
  mutable DnnlEnv env_;
  DeviceShape shape_;
  std::vector<std::unique_ptr<CpuOp>> ops_;
  std::vector<AlignedBuffer> memory_;  // the Program's regions
  AlignedBuffer scratch_;
  AlignedBuffer staging_, d_input_canonical_;  // NCHW copies at the edges, when layouts differ
  Prim input_relayout_, d_input_relayout_;
  float *input_ = nullptr, *d_input_ = nullptr;
  const float* x_ = nullptr;  // the staged batches (the caller's memory)
  Targets y_{nullptr};
  std::vector<Clock::time_point> marks_;
  StatisticsReducer statistics_reducer_;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device(const CompileOptions& options) {
  return std::make_unique<CpuDevice>(options, true);
}

std::unique_ptr<Device> make_unfused_cpu_device(const CompileOptions& options) {
  return std::make_unique<CpuDevice>(options, false);
}

}  // namespace convoy::cpu
