// The CPU Executable: a fixed schedule of CpuOps over one activation arena.
// Memory is planned once here; a step only runs primitives and small loops.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>

#include "backends/cpu/cpu_op.h"
#include "backends/cpu/finite_check.h"
#include "backends/cpu/softmax_kernels.h"
#include "backends/graph_plan.h"
#include "convoy/backends/executable.h"
#include "convoy/core/error.h"
#include "convoy/core/memory.h"
#include "convoy/core/rng.h"
#include "convoy/core/threads.h"

namespace convoy {
namespace {

using cpu::CpuOp;

void copy_checked(std::span<const float> from, std::span<float> to, const char* what) {
  require(from.size() == to.size(), std::string(what) + ": expected " + std::to_string(to.size()) +
                                        " values, got " + std::to_string(from.size()));
  std::copy(from.begin(), from.end(), to.begin());
}

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(const nn::Model& model, const CompileOptions& options, uint64_t seed)
      : options_(options),
        example_size_(numel(model.input_shape())),
        classes_(model.output_shape().at(0)),
        params_(model.num_parameters()),
        grads_(model.num_parameters()),
        state_(model.num_state()) {
    const int64_t n = options.batch_size;
    require(n >= 1, "batch size must be at least 1, got " + std::to_string(n));
    require(model.output_shape().size() == 1,
            "model: the last layer must output [classes] for a classification loss, got " +
                to_string(model.output_shape()));
    set_parameters(model.initial_parameters(seed));
    set_state(model.initial_state());

    const auto& layers = model.layers();
    require_memory_for_batch(layers);
    plan_updates(model);
    for (const auto& plan : layers) {
      // Each layer its own seed (dropout masks), derived from the model's.
      const uint64_t layer_seed = Rng(seed ^ (0xD1B54A32D192ED03ull * (ops_.size() + 1))).next_u64();
      ops_.push_back(cpu::make_cpu_op(env_, plan, n, layer_seed));
      const nn::LayerFlops f = nn::layer_flops(plan);
      profile_.push_back({.name = plan.name, .forward_flops = f.forward * n, .backward_flops = f.backward * n});
    }

    // Plan (see graph_plan.h): offsets first, pointers once the arena exists.
    std::vector<bool> views;
    for (const auto& op : ops_) views.push_back(op->is_view());
    const GraphPlan plan = plan_graph(model, n, options.input_gradient, views, /*align_floats=*/16);
    std::size_t scratch_bytes = 0;
    for (const auto& op : ops_) scratch_bytes = std::max(scratch_bytes, op->scratchpad_bytes());
    arena_ = AlignedBuffer(plan.floats);
    remember_buffers_for_report(layers, plan.activation, plan.gradient);
    scratch_ = AlignedBuffer(scratch_bytes / sizeof(float) + 1);

    auto at = [&](int64_t offset) { return offset < 0 ? nullptr : arena_.data() + offset; };
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto& layer = layers[i];
      cpu::OpBuffers b;
      for (std::size_t k = 0; k < layer.inputs.size(); ++k) {
        b.srcs.push_back(at(plan.activation[layer.inputs[k] + 1]));
        b.diff_srcs.push_back(at(plan.input_gradient[i][k]));
      }
      b.src = b.srcs[0];
      b.diff_src = b.diff_srcs[0];
      b.dst = at(plan.activation[i + 1]);
      b.diff_dst = at(plan.gradient[i + 1]);
      int64_t param_floats = 0;
      for (const auto& p : layer.params) param_floats += p.size();
      if (!layer.params.empty()) {
        b.params = params_.data() + layer.params[0].offset;
        b.grads = grads_.data() + layer.params[0].offset;
      }
      layer_grads_.push_back({b.grads, static_cast<std::size_t>(param_floats)});
      b.reduce_statistics = &statistics_reducer_;
      if (!layer.state.empty()) b.state = state_.data() + layer.state[0].offset;
      b.scratchpad = scratch_.data();
      ops_[i]->bind(env_, b);
    }
    // Gradient sums, grouped by activation: summed before the backward of
    // the layer that produced it (layer a - 1), or at the end for the input.
    for (const GradientSum& s : plan.sums) {
      Sum& sum = sums_.emplace_back();
      if (s.parts.empty()) continue;
      sum.into = at(s.into);
      sum.elements = s.elements;
      for (int64_t part : s.parts) sum.parts.push_back(at(part));
    }
    // The edges: callers pass NCHW; the first layer reads the activation layout.
    const Shape in_shape = cpu::with_batch(n, model.input_shape());
    const bool relayout = in_shape.size() == 4 && in_shape[1] > 1;
    staging_ = AlignedBuffer(relayout ? n * example_size_ : 0);
    input_ = relayout ? staging_.data() : at(plan.activation[0]);
    if (relayout)
      input_relayout_ = cpu::Prim::reorder(env_, cpu::plain_desc(in_shape), input_, cpu::activation_desc(in_shape),
                                           at(plan.activation[0]));
    if (options.input_gradient) {
      d_input_ = at(plan.gradient[0]);
      if (relayout) {
        d_input_canonical_ = AlignedBuffer(n * example_size_);
        d_input_relayout_ = cpu::Prim::reorder(env_, cpu::activation_desc(in_shape), d_input_,
                                               cpu::plain_desc(in_shape), d_input_canonical_.data());
      }
    }
    output_ = at(plan.activation.back());
    d_output_ = at(plan.gradient.back());
  }

  int64_t batch_size() const override { return options_.batch_size; }
  int64_t input_size() const override { return example_size_; }
  int64_t output_size() const override { return classes_; }
  std::string device() const override { return "cpu"; }

  void train_step(const float* x, Targets y) override {
    // The numerical guard: BN statistics are updated by the forward pass, so
    // they are saved first and put back when the step turns out non-finite.
    std::copy(state_.data(), state_.data() + state_.size(), state_before_step_.data());
    const cpu::LossResult r = forward_backward(x, y);
    last_loss_sum_ = r.loss_sum;
    step_finite_ = std::isfinite(r.loss_sum) && cpu::all_finite(grads_.span());
    if (!step_finite_) {
      std::copy(state_before_step_.data(), state_before_step_.data() + state_.size(), state_.data());
      return;
    }
    accumulate(r, batch_size());
    update();
    for (auto& op : ops_) op->next_step();
  }

  double loss_and_gradients(const float* x, Targets y) override {
    return forward_backward(x, y).loss_sum / static_cast<double>(batch_size());
  }

  void eval_step(const float* x, Targets y, int64_t count) override {
    const int64_t n = batch_size();
    require(count >= 0 && count <= n, "eval_step: count " + std::to_string(count) + " exceeds the batch size");
    std::memcpy(input_, x, sizeof(float) * count * example_size_);
    // Inference is per-example: pad a short batch with zeros and ignore those rows.
    std::fill(input_ + count * example_size_, input_ + n * example_size_, 0.0f);
    if (input_relayout_) input_relayout_.run(env_);
    for (auto& op : ops_) op->forward(env_, false);
    accumulate(cpu::loss_forward(options_.loss, options_.label_smoothing, output_, y, count, classes_, nullptr, count), count);
  }

  void set_profiling(bool on) override {
    profiling_ = on;
    if (!on) return;
    profiled_steps_ = 0;
    for (auto& p : profile_) p.forward_seconds = p.backward_seconds = 0;
  }
  std::vector<LayerProfile> profile() const override { return profile_; }
  int64_t profiled_steps() const override { return profiled_steps_; }

  Metrics take_metrics() override { return std::exchange(metrics_, {}); }
  Metrics peek_metrics() const override { return metrics_; }
  void restore_metrics(const Metrics& m) override { metrics_ = m; }
  void set_steps_done(int64_t steps) override {
    for (auto& op : ops_) op->set_step(steps);
  }
  bool last_step_finite() const override { return step_finite_; }
  std::string nonfinite_report() const override;
  void set_learning_rate(float lr) override { options_.optimizer.lr = lr; }
  float learning_rate() const override { return options_.optimizer.lr; }
  int64_t parameter_count() const override { return static_cast<int64_t>(params_.size()); }
  int64_t state_count() const override { return static_cast<int64_t>(state_.size()); }
  int64_t optimizer_state_size() const override { return static_cast<int64_t>(optimizer_state_.size()); }
  void set_optimizer_state(std::span<const float> s) override { copy_checked(s, optimizer_state_.span(), "optimizer state"); }
  void get_optimizer_state(std::span<float> s) const override { copy_checked(optimizer_state_.span(), s, "optimizer state"); }

  void set_parameters(std::span<const float> p) override { copy_checked(p, params_.span(), "parameters"); }
  void get_parameters(std::span<float> p) const override { copy_checked(params_.span(), p, "parameters"); }
  void get_gradients(std::span<float> g) const override { copy_checked(grads_.span(), g, "gradients"); }
  void set_state(std::span<const float> s) override { copy_checked(s, state_.span(), "state"); }
  void get_state(std::span<float> s) const override { copy_checked(state_.span(), s, "state"); }
  void get_output(std::span<float> out) const override {
    copy_checked({output_, static_cast<std::size_t>(batch_size() * classes_)}, out, "output");
  }
  void set_gradient_reducer(GradientReducer* reducer) override { gradient_reducer_ = reducer; }
  void set_batch_norm_reducer(StatisticsReducer reducer) override { statistics_reducer_ = std::move(reducer); }
  void get_input_gradient(std::span<float> g) const override {
    require(d_input_ != nullptr, "input gradient: compile with input_gradient = true");
    const float* canonical = d_input_relayout_ ? d_input_canonical_.data() : d_input_;
    copy_checked({canonical, static_cast<std::size_t>(batch_size() * example_size_)}, g, "input gradient");
  }

 private:
  // Fails with a clear message before any primitive or arena is made for a
  // batch the machine cannot hold: every layer's output and its gradient,
  // plus the input twice (staging), in floating point so no size overflows.
  void require_memory_for_batch(const std::vector<nn::LayerPlan>& layers) const {
    double floats = 2.0 * static_cast<double>(example_size_);
    for (const auto& plan : layers) floats += 2.0 * static_cast<double>(numel(plan.output_shape));
    const double bytes = floats * sizeof(float) * static_cast<double>(options_.batch_size);
    const int64_t available = available_memory_bytes();
    constexpr double kNoMachineHasThat = 1e15;  // bytes; also keeps every later size product in range
    if (bytes <= kNoMachineHasThat && (available < 0 || bytes <= static_cast<double>(available))) return;
    throw UserError("batch size " + std::to_string(options_.batch_size) + " needs " +
                    human_bytes(static_cast<int64_t>(std::min(bytes, 9e18))) +
                    " for activations and gradients, but only " +
                    (available < 0 ? std::string("less") : human_bytes(available)) +
                    " of memory is available; use a smaller --batch-size");
  }

  // Where each layer's output and gradients live, for nonfinite_report().
  void remember_buffers_for_report(const std::vector<nn::LayerPlan>& layers, const std::vector<int64_t>& act,
                                   const std::vector<int64_t>& diff) {
    const int64_t n = batch_size();
    state_before_step_ = AlignedBuffer(state_.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto& plan = layers[i];
      LayerBuffers b{.name = plan.name, .output = act[i + 1], .output_gradient = diff[i + 1],
                     .size = n * numel(plan.output_shape), .is_view = ops_[i]->is_view()};
      for (const auto& slot : plan.params) b.params.emplace_back(slot.offset, slot.size());
      report_layers_.push_back(std::move(b));
    }
    input_offset_ = act[0];
  }

  // Frozen layers (trainable = false) are left out of the update. When every
  // layer trains, the optimizer runs over the whole flat buffer; otherwise
  // the trainable runs are gathered into one buffer, updated and scattered
  // back, so the optimizer state covers only them (as a PyTorch optimizer
  // given only the trainable parameters).
  void plan_updates(const nn::Model& model) {
    int64_t trainable = 0;
    for (const auto& plan : model.layers()) {
      if (!plan.trainable || plan.params.empty()) continue;
      const int64_t begin = plan.params.front().offset, end = plan.params.back().offset + plan.params.back().size();
      if (!runs_.empty() && runs_.back().second == begin)
        runs_.back().second = end;
      else
        runs_.push_back({begin, end});
      trainable += end - begin;
    }
    gather_ = trainable != model.num_parameters();
    if (gather_) {
      trainable_params_ = AlignedBuffer(trainable);
      trainable_grads_ = AlignedBuffer(trainable);
    }
    optimizer_state_ = AlignedBuffer(optim::state_size(options_.optimizer, trainable));
  }

  void update() {
    if (!gather_) return optim::step(options_.optimizer, params_.span(), grads_.span(), optimizer_state_.span());
    if (trainable_params_.size() == 0) return;
    int64_t at = 0;
    for (auto [begin, end] : runs_) {
      std::copy(params_.data() + begin, params_.data() + end, trainable_params_.data() + at);
      std::copy(grads_.data() + begin, grads_.data() + end, trainable_grads_.data() + at);
      at += end - begin;
    }
    optim::step(options_.optimizer, trainable_params_.span(), trainable_grads_.span(), optimizer_state_.span());
    at = 0;
    for (auto [begin, end] : runs_) {
      std::copy(trainable_params_.data() + at, trainable_params_.data() + at + end - begin, params_.data() + begin);
      at += end - begin;
    }
  }

  cpu::LossResult forward_backward(const float* x, Targets y) {
    const int64_t n = batch_size();
    std::memcpy(input_, x, sizeof(float) * n * example_size_);
    if (input_relayout_) input_relayout_.run(env_);
    if (profiling_) return profiled_forward_backward(y);
    for (auto& op : ops_) op->forward(env_, true);
    auto result = cpu::loss_forward(options_.loss, options_.label_smoothing, output_, y, n, classes_, d_output_, n);
    for (std::size_t i = ops_.size(); i-- > 0;) {
      sum_gradient(i + 1);
      ops_[i]->backward(env_);
      if (gradient_reducer_) gradients_ready(i);
    }
    sum_gradient(0);
    if (d_input_relayout_) d_input_relayout_.run(env_);
    if (gradient_reducer_) gradient_reducer_->finish(grads_.span());
    return result;
  }

  // The same step with a clock read around every op.
  cpu::LossResult profiled_forward_backward(Targets y) {
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); };
    for (std::size_t i = 0; i < ops_.size(); ++i) {
      const auto t = Clock::now();
      ops_[i]->forward(env_, true);
      profile_[i].forward_seconds += seconds(t);
    }
    auto result = cpu::loss_forward(options_.loss, options_.label_smoothing, output_, y, batch_size(), classes_, d_output_, batch_size());
    for (std::size_t i = ops_.size(); i-- > 0;) {
      const auto t = Clock::now();
      sum_gradient(i + 1);
      ops_[i]->backward(env_);
      profile_[i].backward_seconds += seconds(t);
      if (gradient_reducer_) gradients_ready(i);
    }
    sum_gradient(0);
    if (d_input_relayout_) d_input_relayout_.run(env_);
    if (gradient_reducer_) gradient_reducer_->finish(grads_.span());
    ++profiled_steps_;
    return result;
  }

  // Layer i's parameter gradients are final: the reducer may start on them.
  void gradients_ready(std::size_t i) {
    if (!layer_grads_[i].empty()) gradient_reducer_->ready(layer_grads_[i]);
  }

  // An activation read by several layers: its gradient is the sum of theirs.
  void sum_gradient(std::size_t a) {
    const Sum& g = sums_[a];
    if (g.parts.empty() || !g.into) return;
    float* into = g.into;
    const int64_t n = g.elements;
    const float* first = g.parts[0];
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) into[i] = first[i];
    for (std::size_t k = 1; k < g.parts.size(); ++k) {
      const float* p = g.parts[k];
#pragma omp parallel for simd schedule(static)
      for (int64_t i = 0; i < n; ++i) into[i] += p[i];
    }
  }

  void accumulate(const cpu::LossResult& r, int64_t rows) {
    metrics_.loss_sum += r.loss_sum;
    metrics_.correct += r.correct;
    metrics_.count += rows;
  }

  cpu::DnnlEnv env_;
  CompileOptions options_;
  int64_t example_size_, classes_;
  AlignedBuffer params_, grads_, optimizer_state_, state_, arena_, scratch_;
  std::vector<std::pair<int64_t, int64_t>> runs_;  // [begin, end) of trainable parameters
  bool gather_ = false;                            // some layer is frozen: update through the buffers below
  AlignedBuffer trainable_params_, trainable_grads_;
  AlignedBuffer staging_, d_input_canonical_;  // NCHW copies at the edges, when layouts differ
  cpu::Prim input_relayout_, d_input_relayout_;
  std::vector<std::unique_ptr<CpuOp>> ops_;
  struct Sum {
    float* into = nullptr;
    std::vector<const float*> parts;
    int64_t elements = 0;
  };
  std::vector<Sum> sums_;  // per activation
  float *input_ = nullptr, *d_input_ = nullptr, *output_ = nullptr, *d_output_ = nullptr;
  Metrics metrics_;
  // The numerical guard's state and what its report scans.
  struct LayerBuffers {
    std::string name;
    int64_t output = -1, output_gradient = -1, size = 0;  // arena offsets (-1: none), floats
    bool is_view = false;
    std::vector<std::pair<int64_t, int64_t>> params;  // (offset, size) in params_/grads_
  };
  bool step_finite_ = true;
  double last_loss_sum_ = 0;
  AlignedBuffer state_before_step_;
  std::vector<LayerBuffers> report_layers_;
  int64_t input_offset_ = 0;
  bool profiling_ = false;
  int64_t profiled_steps_ = 0;
  std::vector<LayerProfile> profile_;
  // Data parallelism: unset for one replica.
  GradientReducer* gradient_reducer_ = nullptr;
  StatisticsReducer statistics_reducer_;
  std::vector<std::span<float>> layer_grads_;  // per op; empty for ops without parameters
};

std::string CpuExecutable::nonfinite_report() const {
  if (step_finite_) return "";
  const int64_t n = batch_size();
  const float* arena = arena_.data();
  auto span_at = [&](int64_t offset, int64_t size) {
    return std::span<const float>(arena + offset, static_cast<std::size_t>(offset < 0 ? 0 : size));
  };
  // In the order the step computed them: the forward pass, the loss, then
  // the backward pass from the last layer to the first.
  std::vector<cpu::NamedValues> forward;
  forward.push_back({"the input batch (check the data)", span_at(input_offset_, n * example_size_)});
  for (const auto& l : report_layers_)
    if (!l.is_view) forward.push_back({"the forward output of " + l.name, span_at(l.output, l.size)});
  if (std::string where = cpu::first_nonfinite(forward); !where.empty()) return where;
  if (!std::isfinite(last_loss_sum_)) return "the loss";
  for (auto l = report_layers_.rbegin(); l != report_layers_.rend(); ++l) {
    if (!l->is_view && l->output_gradient >= 0 &&
        !cpu::all_finite(span_at(l->output_gradient, l->size)))
      return "the gradient at the output of " + l->name;
    for (const auto& [offset, size] : l->params)
      if (!cpu::all_finite({grads_.data() + offset, static_cast<std::size_t>(size)}))
        return "the gradient of " + l->name + "'s parameters";
  }
  return "a gradient";
}

}  // namespace

std::unique_ptr<Executable> compile_cpu(const nn::Model& model, const CompileOptions& options, uint64_t seed) {
  return std::make_unique<CpuExecutable>(model, options, seed);
}

}  // namespace convoy
