#include "backends/program.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "backends/buffer_sizes.h"
#include "backends/dropout_mask.h"
#include "backends/targets.h"
#include "convoy/core/error.h"
#include "convoy/nn/layers.h"

namespace convoy {

Program::Program(const nn::Model& model, const CompileOptions& options, uint64_t seed, std::unique_ptr<Device> device,
                 BatchSlice slice)
    : options_(options),
      slice_(slice),
      batch_(options.batch_size),
      example_size_(numel(model.input_shape())),
      classes_(model.output_shape().at(0)),
      device_(std::move(device)) {
  require(batch_ >= 1, "batch size must be at least 1, got " + std::to_string(batch_));
  const int replicas = device_->replicas();
  require(batch_ % replicas == 0, "batch size " + std::to_string(batch_) + " does not split into " +
                                      std::to_string(replicas) + " replicas");
  rows_ = batch_ / replicas;
  require(model.output_shape().size() == 1,
          "model: the last layer must output [classes] for a classification loss, got " +
              to_string(model.output_shape()));
  slots_ = std::max<int64_t>(device_->steps_per_call(options), 1);
  compiled_for_ = {.device = device_->name(), .batch_size = batch_, .input_size = example_size_,
                   .output_size = classes_, .steps_per_call = slots_};
  const auto& layers = model.layers();
  layers_ = layers.size();
  std::vector<uint64_t> seeds;
  for (std::size_t i = 0; i < layers_; ++i) seeds.push_back(dropout_layer_seed(seed, i));
  device_->make_ops(model, {.batch = rows_, .input = model.input_shape(), .classes = classes_, .slots = slots_},
                    seeds);
  for (std::size_t i = 0; i < layers_; ++i) {
    const nn::LayerFlops f = nn::layer_flops(layers[i]);
    const int in = device_->runs_in(i);
    profile_.push_back({.name = layers[i].name, .forward_flops = f.forward * batch_,
                        .backward_flops = f.backward * batch_,
                        .runs_in = in < 0 ? std::string() : layers[static_cast<std::size_t>(in)].name});
  }
  plan_memory(model);
  // Start values, then the ops (a GPU's convolutions time their algorithms on the real buffers).
  write(Held::parameters, model.initial_parameters(seed));
  write(Held::state, model.initial_state());
  set_learning_rate(options.optimizer.lr);
  bind_ops(model);
  device_->finish_compile();
}

Program::~Program() {
  // Captured steps still running must not be destroyed under them.
  try {
    if (device_) device_->synchronize();
  } catch (const std::exception&) {  // a device error: nothing more to wait for
  }
}

// --- compile time

void Program::plan_memory(const nn::Model& model) {
  params_count_ = model.num_parameters();
  state_count_ = model.num_state();
  host_runs_ = plan_trainable_runs(model);
  optimizer_state_count_ = optim::state_size(options_.optimizer, trainable_count_);
  std::vector<bool> views;
  for (std::size_t i = 0; i < layers_; ++i) views.push_back(device_->is_view(i));
  plan_ = plan_graph(model, rows_, options_.input_gradient, views, device_->align_floats());
  const auto floats = [](int64_t n) { return sizeof(float) * static_cast<std::size_t>(n); };
  const std::vector<void*> at = device_->allocate({
      {"parameters", floats(params_count_)},
      {"gradients", floats(params_count_)},
      {"optimizer state", floats(optimizer_state_count_)},
      {"state", floats(state_count_)},
      {"state before the step", floats(state_count_)},
      {"scalars", sizeof(DeviceScalars)},
      {"activations", floats(plan_.floats)},
      {"packed parameters", floats(gather_ ? trainable_count_ : 0)},
      {"packed gradients", floats(gather_ ? trainable_count_ : 0)},
      {"run table", sizeof(int64_t) * host_runs_.size()},
  });
  params_ = static_cast<float*>(at[0]);
  grads_ = static_cast<float*>(at[1]);
  optimizer_state_ = static_cast<float*>(at[2]);
  state_ = static_cast<float*>(at[3]);
  state_before_ = static_cast<float*>(at[4]);
  scalars_ = static_cast<DeviceScalars*>(at[5]);
  activations_ = static_cast<float*>(at[6]);
  packed_params_ = static_cast<float*>(at[7]);
  packed_grads_ = static_cast<float*>(at[8]);
  runs_ = static_cast<int64_t*>(at[9]);
  if (!host_runs_.empty()) device_->to_device(runs_, host_runs_.data(), sizeof(int64_t) * host_runs_.size());
  const float one = 1.0f;
  device_->to_device(&scalars_->clip_scale, &one, sizeof one);
}

// Frozen layers (trainable = false) are left out of the update. When every
// layer trains, the optimizer runs over the whole flat buffer; otherwise the
// trainable runs (adjacent layers merged) are gathered into one buffer,
// updated and scattered back, so the optimizer state covers only them (as a
// PyTorch optimizer given only the trainable parameters). Sets
// trainable_count_ and gather_; returns the run table gather_runs reads: the
// runs' flat starts, then their packed starts.
std::vector<int64_t> Program::plan_trainable_runs(const nn::Model& model) {
  std::vector<std::pair<int64_t, int64_t>> runs;  // [begin, end) in the flat buffer
  for (const auto& plan : model.layers()) {
    if (!plan.trainable || plan.params.empty()) continue;
    const int64_t begin = plan.params.front().offset, end = plan.params.back().offset + plan.params.back().size();
    if (!runs.empty() && runs.back().second == begin)
      runs.back().second = end;
    else
      runs.emplace_back(begin, end);
  }
  trainable_count_ = 0;
  std::vector<int64_t> flat_begin, packed_begin;
  for (auto [begin, end] : runs) {
    flat_begin.push_back(begin);
    packed_begin.push_back(trainable_count_);
    trainable_count_ += end - begin;
  }
  gather_ = trainable_count_ != params_count_;
  run_count_ = gather_ ? static_cast<int64_t>(runs.size()) : 0;
  if (!gather_) return {};
  flat_begin.insert(flat_begin.end(), packed_begin.begin(), packed_begin.end());
  return flat_begin;
}

void Program::bind_ops(const nn::Model& model) {
  auto at = [&](int64_t offset) { return offset < 0 ? nullptr : activations_ + offset; };
  input_ = at(plan_.activation[0]);
  d_input_ = at(plan_.gradient[0]);
  output_ = at(plan_.activation.back());
  d_output_ = at(plan_.gradient.back());
  device_->bind_edges(input_, d_input_);
  const auto& layers = model.layers();
  // A fused chain (the layers that run in one, and that one) writes only its
  // last layer's output and reads only that layer's output gradient.
  std::vector<int> chain(layers.size(), -1), last(layers.size(), -1);
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (const int head = device_->runs_in(i); head >= 0) {
      chain[static_cast<std::size_t>(head)] = chain[i] = head;
      last[static_cast<std::size_t>(head)] = static_cast<int>(i);
    }
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto& layer = layers[i];
    OpBuffers b;
    for (std::size_t k = 0; k < layer.inputs.size(); ++k) {
      b.srcs.push_back(at(plan_.activation[layer.inputs[k] + 1]));
      b.diff_srcs.push_back(at(plan_.input_gradient[i][k]));
    }
    b.src = b.srcs[0];
    b.diff_src = b.diff_srcs[0];
    b.dst = at(plan_.activation[i + 1]);
    b.diff_dst = at(plan_.gradient[i + 1]);
    int64_t param_floats = 0;
    for (const auto& p : layer.params) param_floats += p.size();
    if (!layer.params.empty()) {
      b.params = params_ + layer.params[0].offset;
      b.grads = grads_ + layer.params[0].offset;
    }
    layer_grads_.emplace_back(b.grads, static_cast<std::size_t>(param_floats));
    if (!layer.state.empty()) b.state = state_ + layer.state[0].offset;
    b.steps_done = &scalars_->steps_done;
    b.first_example = slice_.first_example;
    b.mask_batch = slice_.of_batch;
    device_->bind(i, std::move(b));

    // The chain's last output is the first place its work shows: name the
    // whole chain there, so a fault born in its head is not pinned on the tail.
    std::string shown = layer.name;
    if (chain[i] >= 0 && last[static_cast<std::size_t>(chain[i])] == static_cast<int>(i)) {
      shown = layers[static_cast<std::size_t>(chain[i])].name;
      for (std::size_t k = static_cast<std::size_t>(chain[i]) + 1; k <= i; ++k)
        if (chain[k] == chain[i]) shown += " → " + layers[k].name;
      shown = layer.name + " (one op: " + shown + ")";
    }
    LayerBuffers r{.name = shown, .output = at(plan_.activation[i + 1]),
                   .output_gradient = at(plan_.gradient[i + 1]), .size = plan_.elements[i + 1],
                   .is_view = device_->is_view(i),
                   .unwritten = chain[i] >= 0 && last[static_cast<std::size_t>(chain[i])] != static_cast<int>(i)};
    for (const auto& slot : layer.params) r.params.emplace_back(slot.offset, slot.size());
    report_layers_.push_back(std::move(r));
  }
  // Gradient sums, grouped by activation: summed before the backward of the
  // layer that produced it (layer a - 1), or at the end for the input.
  for (const GradientSum& s : plan_.sums) {
    Sum& sum = sums_.emplace_back();
    if (s.parts.empty()) continue;
    sum.into = at(s.into);
    sum.elements = s.elements;
    for (int64_t part : s.parts) sum.parts.push_back(at(part));
  }
}

// --- steps

// Chunks of at most `slots_` batches, each one capture on a device that
// captures. After each, one read of the guard's scalars: a faulty step ends
// the call there (the steps after it in the chunk ran but changed nothing).
int64_t Program::train_steps(const float* x, Targets y, int64_t n) {
  check_targets(options_.loss, y, n * batch_, classes_);
  for (int64_t done = 0; done < n;) {
    const int64_t k = std::min(n - done, slots_);
    const Targets part = y.dense ? Targets::rows(y.dense + done * batch_ * classes_) : Targets(y.labels + done * batch_);
    const int bank = device_->stage(x + done * batch_ * example_size_, part, k, batch_);
    device_->zero(&scalars_->halted, sizeof(int));
    device_->zero(&scalars_->steps_run, sizeof(int));
    run_training(bank, k, y.dense != nullptr);
    device_->release(bank);
    const DeviceScalars s = read_scalars();
    step_finite_ = s.halted == 0;
    if (!step_finite_) {
      fault_was_last_step_ = s.steps_run == k;
      return done + s.steps_run;
    }
    done += k;
  }
  return n;
}

void Program::run_training(int bank, int64_t n, bool dense) {
  if (device_->can_capture() && options_.gpu.graphs && captures_work_ && !profiling_) {
    if (CapturedSteps* steps = captured_for(bank, n, dense)) {
      device_->launch(*steps);
      return;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    enqueue_step(bank, i, dense, Step::train, profiling_);
    if (!profiling_) continue;
    const std::vector<double> seconds = device_->mark_seconds();
    if (seconds.empty()) {  // the device times no layers: unknown, not zero
      for (auto& p : profile_) p.forward_seconds = p.backward_seconds = std::nan("");
      ++profiled_steps_;
      continue;
    }
    for (std::size_t k = 0; k < layers_; ++k) {
      profile_[k].forward_seconds += seconds[k];
      profile_[k].backward_seconds += seconds[layers_ + 1 + (layers_ - 1 - k)];  // backward of op k starts there
    }
    ++profiled_steps_;
  }
}

// The captured steps for (bank, n, target kind). The first execution of each
// kind runs eagerly (null here): libraries and kernels load lazily, and that
// first-use work must not happen inside a capture. The second captures. Null
// also when capture fails: steps then run one by one from here on (said once).
CapturedSteps* Program::captured_for(int bank, int64_t n, bool dense) {
  const auto key = std::make_tuple(bank, n, dense);
  if (auto it = captured_.find(key); it != captured_.end()) return it->second.get();
  if (ran_eagerly_.insert(key).second) return nullptr;
  try {
    device_->begin_capture();
    try {
      for (int64_t i = 0; i < n; ++i) enqueue_step(bank, i, dense, Step::train, false);
    } catch (...) {
      device_->end_capture(false);
      throw;
    }
    std::unique_ptr<CapturedSteps> steps = device_->end_capture(true);
    ++captures_;
    return captured_.emplace(key, std::move(steps)).first->second.get();
  } catch (const std::exception& e) {
    captures_work_ = false;
    capture_failure_ = e.what();
    // The reducer was told of gradients of a step that will never run; the
    // eager rerun must find it as between steps.
    if (reducer_) reducer_->abandon_step();
    std::fprintf(stderr, "convoy: capturing steps on %s failed, running them one by one: %s\n",
                 device_->name().c_str(), e.what());
    return nullptr;
  }
}

// One step on slot i of `bank`: input, forward, loss, backward, gradient
// sums and the reducer, and (training) the guard and the optimizer update.
// `timed`: a timestamp before each op's forward and backward (profiling).
void Program::enqueue_step(int bank, int64_t i, bool dense, Step kind, bool timed) {
  const Slot s = device_->slot(bank, i);
  const std::size_t n = layers_;
  if (kind == Step::train) device_->begin_guarded_step(state_, state_before_, state_count_, scalars_);
  device_->load_input(s.x, batch_);
  for (std::size_t k = 0; k < n; ++k) {
    if (timed) device_->mark(k);
    device_->forward(k, true);
  }
  if (timed) device_->mark(n);
  LossCall loss = loss_call(s, dense, batch_);
  loss.d_out = d_output_;
  if (kind == Step::train) {  // committed to the metrics by the guard
    loss.loss_sum = &scalars_->step_loss_sum;
    loss.correct = &scalars_->step_correct;
  } else {
    loss.step_loss = &scalars_->step_loss;
  }
  device_->loss(loss);
  for (std::size_t k = n; k-- > 0;) {
    if (timed) device_->mark(n + 1 + (n - 1 - k));
    sum_gradient(k + 1);
    device_->backward(k);
    // Layer k's parameter gradients are final: the reducer may start on them.
    if (reducer_ && !layer_grads_[k].empty()) reducer_->ready(layer_grads_[k]);
  }
  if (timed) device_->mark(2 * n + 1);
  sum_gradient(0);
  if (reducer_) reducer_->finish({grads_, static_cast<std::size_t>(params_count_)});
  if (kind != Step::train) return;
  device_->finish_guarded_step(grads_, params_count_, state_, state_before_, state_count_, batch_, scalars_);
  update_parameters();
}

// The optimizer over the whole flat buffer, or, with frozen layers, over the
// trainable parameters packed (the optimizer then clips and decays them
// alone; the frozen ones are never touched).
void Program::update_parameters() {
  if (!gather_) return device_->optimizer_step(options_.optimizer, params_, grads_, optimizer_state_, params_count_, scalars_);
  if (trainable_count_ == 0) return;
  device_->gather_runs(params_, packed_params_, runs_, run_count_, trainable_count_);
  device_->gather_runs(grads_, packed_grads_, runs_, run_count_, trainable_count_);
  device_->optimizer_step(options_.optimizer, packed_params_, packed_grads_, optimizer_state_, trainable_count_,
                          scalars_);
  device_->scatter_runs(packed_params_, params_, runs_, run_count_, trainable_count_);
}

// An activation read by several layers: its gradient is the sum of theirs.
void Program::sum_gradient(std::size_t a) {
  const Sum& g = sums_[a];
  if (g.parts.empty() || !g.into) return;
  device_->sum(g.into, g.parts, g.elements);
}

LossCall Program::loss_call(const Slot& s, bool dense, int64_t rows) const {
  LossCall a;
  a.loss = options_.loss;
  a.smoothing = options_.label_smoothing;
  a.out = output_;
  a.targets = s;
  if (dense)
    a.targets.labels = nullptr;
  else
    a.targets.dense = nullptr;
  a.rows = rows;
  a.cols = classes_;
  a.grad_rows = std::max<int64_t>(rows, 1);
  return a;
}

double Program::loss_and_gradients(const float* x, Targets y) {
  check_targets(options_.loss, y, batch_, classes_);
  const int bank = device_->stage(x, y, 1, batch_);
  enqueue_step(bank, 0, y.dense != nullptr, Step::gradients_only, false);
  device_->release(bank);
  return read_scalars().step_loss / static_cast<double>(batch_);
}

void Program::eval_step(const float* x, Targets y, int64_t count) {
  require_eval_count(count, batch_);
  check_targets(options_.loss, y, count, classes_);
  const int bank = device_->stage(x, y, 1, count);
  const Slot s = device_->slot(bank, 0);
  // Inference is per-example: the rows past `count` are zero and ignored.
  device_->load_input(s.x, count);
  for (std::size_t k = 0; k < layers_; ++k) device_->forward(k, false);
  LossCall loss = loss_call(s, y.dense != nullptr, count);
  loss.loss_sum = &scalars_->loss_sum;
  loss.correct = &scalars_->correct;
  device_->loss(loss);
  device_->release(bank);
  count_ += count;
}

// --- metrics, guard, profiling

// Training steps count their examples on the device (a faulty step adds
// none); evaluation counts on the host.
Metrics Program::metrics(Metrics::Then then) {
  const DeviceScalars s = read_scalars();
  const Metrics m{.loss_sum = s.loss_sum, .correct = static_cast<int64_t>(s.correct),
                  .count = count_ + static_cast<int64_t>(s.train_examples)};
  if (then == Metrics::reset) {
    device_->zero(&scalars_->loss_sum, sizeof(double));
    device_->zero(&scalars_->correct, sizeof(unsigned long long));
    device_->zero(&scalars_->train_examples, sizeof(unsigned long long));
    count_ = 0;
  }
  return m;
}

void Program::restore_metrics(const Metrics& m) {
  const auto correct = static_cast<unsigned long long>(m.correct);
  device_->to_device(&scalars_->loss_sum, &m.loss_sum, sizeof(double));
  device_->to_device(&scalars_->correct, &correct, sizeof correct);
  device_->zero(&scalars_->train_examples, sizeof(unsigned long long));
  count_ = m.count;
}

void Program::set_steps_done(int64_t steps) { device_->to_device(&scalars_->steps_done, &steps, sizeof steps); }

void Program::set_learning_rate(float lr) {
  options_.optimizer.lr = lr;
  device_->to_device(&scalars_->lr, &lr, sizeof lr);
}

// After a faulty step: where non-finite values first showed, scanning that
// step's buffers in the order it computed them: the input batch, each
// layer's output, the loss, then the gradients from the last layer back.
std::string Program::nonfinite_report() const {
  if (step_finite_) return "";
  if (!fault_was_last_step_)
    return "the loss or the gradients (later steps of the same call overwrote the faulty one's buffers; "
           "steps_per_execution 1 says where)";
  if (!device_->all_finite(input_, rows_ * example_size_)) return "the input batch (check the data)";
  for (const auto& l : report_layers_)
    if (!l.is_view && !l.unwritten && !device_->all_finite(l.output, l.size)) return "the forward output of " + l.name;
  if (!std::isfinite(read_scalars().step_loss_sum)) return "the loss";
  for (auto l = report_layers_.rbegin(); l != report_layers_.rend(); ++l) {
    if (!l->is_view && !l->unwritten && l->output_gradient && !device_->all_finite(l->output_gradient, l->size))
      return "the gradient at the output of " + l->name;
    for (const auto& [offset, size] : l->params)
      if (!device_->all_finite(grads_ + offset, size)) return "the gradient of " + l->name + "'s parameters";
  }
  return "a gradient";
}

void Program::set_profiling(bool on) {
  profiling_ = on;
  if (!on) return;
  profiled_steps_ = 0;
  for (auto& p : profile_) p.forward_seconds = p.backward_seconds = 0;
  device_->prepare_marks(2 * layers_ + 2);
}

// --- host <-> device

DeviceScalars Program::read_scalars() const {
  DeviceScalars s{};
  device_->to_host(&s, scalars_, sizeof s);
  return s;
}

int64_t Program::size(Held held) const {
  switch (held) {
    case Held::parameters:
    case Held::gradients: return params_count_;
    case Held::state: return state_count_;
    case Held::optimizer_state: return optimizer_state_count_;
    case Held::output: return batch_ * classes_;
    case Held::input_gradient: return batch_ * example_size_;
  }
  return 0;
}

float* Program::flat(Held held) const {
  switch (held) {
    case Held::parameters: return params_;
    case Held::gradients: return grads_;
    case Held::state: return state_;
    case Held::optimizer_state: return optimizer_state_;
    case Held::output: return output_;
    case Held::input_gradient: return nullptr;  // the device keeps it in its input layout
  }
  return nullptr;
}

void Program::read(Held held, std::span<float> to) const {
  if (held == Held::input_gradient) require(d_input_ != nullptr, "input gradient: compile with input_gradient = true");
  const int64_t count = size(held);
  require_room(to.size(), count, held_name(held));
  if (held == Held::input_gradient) return device_->read_input_gradient(to);
  if (held == Held::output) return device_->replicas_to_host(to.data(), output_, sizeof(float) * rows_ * classes_);
  device_->to_host(to.data(), flat(held), sizeof(float) * count);
}

void Program::write(Held held, std::span<const float> from) {
  require_writable(held);
  const int64_t count = size(held);
  require_values(from.size(), count, held_name(held));
  device_->to_device(flat(held), from.data(), sizeof(float) * count);
}

// --- replicas

void Program::set_gradient_reducer(GradientReducer* reducer) {
  device_->accept_gradient_reducer(reducer);
  reducer_ = reducer;
  forget_captures();  // captured steps lack (or hold) the reducer's work
}

void Program::set_batch_norm_reducer(StatisticsReducer reducer) {
  device_->set_batch_norm_reducer(std::move(reducer), reducer_);
  forget_captures();
}

void Program::forget_captures() {
  device_->synchronize();  // none may still run
  captured_.clear();
  ran_eagerly_.clear();
}

}  // namespace convoy
