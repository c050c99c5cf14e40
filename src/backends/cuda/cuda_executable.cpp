// The CUDA Executable: a fixed schedule of CudaOps over one device arena.
//
// Memory: one cudaMalloc at compile time holds the flat parameter, gradient,
// optimizer-state and BN-state buffers, the activations and gradients of the
// shared graph plan (backends/graph_plan.h), the ops' own memory, a workspace
// shared by cuDNN and cuBLAS, the device scalars (metrics, learning rate) and
// two banks of input slots. Nothing is allocated inside a step.
//
// Feeding: a batch is copied by the host into a pinned bank, then to the
// device bank by cudaMemcpyAsync on a copy stream; the compute stream waits on
// an event for it. The two banks alternate, so the next batch's copy overlaps
// the current step's compute, and the host blocks only when it is two calls
// ahead of the GPU.
//
// Steps: a training step copies its slot's images into the input activation
// (one device-to-device copy, so every op stays bound to fixed memory),
// then runs forward, loss, backward and the optimizer. train_steps(n)
// captures n such steps, each reading its own slot, into one CUDA graph the
// second time it sees (bank, n, target kind) and replays it after that.
// Metrics accumulate on the device and are read only by take/peek_metrics.
//
// Replicas (the nccl strategy): a DeviceGradientReducer bound to the compute
// stream is told of each layer's gradient slice as its backward is enqueued
// and of the whole gradient buffer before the update; it enqueues NCCL's
// allreduce ordered with the stream, so the steps, CUDA graphs included, carry
// the communication with them and the host never waits for it.
//
// Frozen layers (trainable = false) write no parameter gradients, and the
// optimizer runs over the trainable parameters alone, packed into one buffer
// (gathered before, scattered after), as the CPU backend does: its state
// covers only them. Dropout masks are the CPU's (dropout_mask.h), drawn from
// the count of applied steps, which lives on the device.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/dropout_mask.h"
#include "backends/cuda/kernels.h"
#include "backends/device_reducer.h"
#include "backends/graph_plan.h"
#include "backends/targets.h"
#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/core/error.h"

namespace convoy {
namespace {

using namespace cuda;

// cuDNN's and cuBLAS's shared workspace. cuDNN's algorithm search only
// considers algorithms that fit in it.
constexpr std::size_t kWorkspaceBytes = std::size_t{64} << 20;
constexpr int64_t kAlignBytes = 256;  // cuDNN and cuBLAS like 256-byte aligned buffers

int64_t aligned(int64_t bytes) { return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

// Owners of CUDA objects, destroyed in reverse order of declaration.
struct StreamDeleter {
  void operator()(cudaStream_t s) const { cudaStreamDestroy(s); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct DnnDeleter {
  void operator()(cudnnHandle_t h) const { cudnnDestroy(h); }
};
struct BlasDeleter {
  void operator()(cublasHandle_t h) const { cublasDestroy(h); }
};
struct DeviceFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct HostFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t g) const { cudaGraphExecDestroy(g); }
};
using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using GraphExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;

Stream make_stream() {
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}

Event make_event(bool timing) {
  cudaEvent_t e = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(e);
}

LossKind loss_kind(Loss loss) {
  switch (loss) {
    case Loss::nll: return LossKind::nll;
    case Loss::softmax_cross_entropy: return LossKind::softmax_cross_entropy;
    case Loss::binary_cross_entropy: return LossKind::binary_cross_entropy;
  }
  return LossKind::nll;
}

OptimizerArgs optimizer_args(const optim::OptimizerOptions& o) {
  OptimizerArgs a;
  switch (o.kind) {
    case optim::Kind::sgd: a.kind = OptimizerKind::sgd; break;
    case optim::Kind::adam: a.kind = OptimizerKind::adam; break;
    case optim::Kind::adamw: a.kind = OptimizerKind::adamw; break;
    case optim::Kind::rmsprop: a.kind = OptimizerKind::rmsprop; break;
  }
  a.momentum = o.momentum;
  a.weight_decay = o.weight_decay;
  a.nesterov = o.nesterov;
  a.beta1 = o.beta1;
  a.beta2 = o.beta2;
  a.eps = o.eps;
  a.alpha = o.alpha;
  a.clip_norm = o.clip_norm;
  return a;
}

class CudaExecutable final : public Executable {
 public:
  CudaExecutable(const nn::Model& model, const CompileOptions& options, uint64_t seed)
      : options_(options),
        batch_(options.batch_size),
        example_size_(numel(model.input_shape())),
        classes_(model.output_shape().at(0)),
        slots_(std::max<int64_t>(options.steps_per_execution, 1)) {
    require(batch_ >= 1, "batch size must be at least 1, got " + std::to_string(batch_));
    require(model.output_shape().size() == 1,
            "model: the last layer must output [classes] for a classification loss, got " +
                to_string(model.output_shape()));
    const GpuReport& gpus = find_gpus();
    require(gpus.usable(), "no usable GPU: " + gpus.why_unusable + "; train on the CPU (--device cpu)");
    gpu_ = selected_gpu();  // 0, or the replica's own GPU under the nccl strategy
    for (const GpuInfo& g : gpus.gpus)
      if (g.index == gpu_) device_name_ = "cuda:" + std::to_string(gpu_) + " (" + g.name + ")";
    CUDA_CHECK(cudaSetDevice(gpu_));

    compute_ = make_stream();
    copy_ = make_stream();
    cudnnHandle_t dnn = nullptr;
    CUDA_CHECK(cudnnCreate(&dnn));
    dnn_.reset(dnn);
    CUDA_CHECK(cudnnSetStream(dnn, compute_.get()));
    cublasHandle_t blas = nullptr;
    CUDA_CHECK(cublasCreate(&blas));
    blas_.reset(blas);
    CUDA_CHECK(cublasSetStream(blas, compute_.get()));
    CUDA_CHECK(cublasSetMathMode(blas, options.gpu.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    for (int b = 0; b < 2; ++b) {
      copied_[b] = make_event(false);
      consumed_[b] = make_event(false);
    }

    const auto& layers = model.layers();
    std::vector<bool> views;
    for (const auto& layer : layers) {
      ops_.push_back(make_cuda_op(layer, batch_, dropout_layer_seed(seed, ops_.size())));
      views.push_back(ops_.back()->is_view());
      const nn::LayerFlops f = nn::layer_flops(layer);
      profile_.push_back(
          {.name = layer.name, .forward_flops = f.forward * batch_, .backward_flops = f.backward * batch_});
    }
    const GraphPlan plan = plan_graph(model, batch_, options.input_gradient, views, kAlignBytes / sizeof(float));
    allocate(model, plan);

    // Start values, then the ops (convolutions time their algorithms on the real buffers).
    set_parameters(model.initial_parameters(seed));
    set_state(model.initial_state());
    set_learning_rate(options.optimizer.lr);
    CUDA_CHECK(cublasSetWorkspace(blas, ctx_.workspace, ctx_.workspace_bytes));
    ctx_.stream = compute_.get();
    ctx_.cudnn = dnn;
    ctx_.cublas = blas;
    ctx_.tf32 = options.gpu.tf32;
    bind_ops(model, plan);
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
    CUDA_CHECK(cudaGetLastError());
    for (auto& e : consumed_) CUDA_CHECK(cudaEventRecord(e.get(), compute_.get()));
    for (auto& e : copied_) CUDA_CHECK(cudaEventRecord(e.get(), copy_.get()));
  }

  ~CudaExecutable() override {
    // Work still queued may touch the memory freed below.
    if (compute_) cudaStreamSynchronize(compute_.get());
    if (copy_) cudaStreamSynchronize(copy_.get());
  }

  int64_t batch_size() const override { return batch_; }
  int64_t input_size() const override { return example_size_; }
  int64_t output_size() const override { return classes_; }
  std::string device() const override { return device_name_; }

  void train_step(const float* x, Targets y) override { train_steps(x, y, 1); }

  // Chunks of at most `slots_` batches, each one graph. After each, one read
  // of the guard's scalars: a faulty step ends the call there (the steps
  // after it in the chunk ran but changed nothing; see guard.cu).
  int64_t train_steps(const float* x, Targets y, int64_t n) override {
    check_targets(options_.loss, y, n * batch_, classes_);
    for (int64_t done = 0; done < n;) {
      const int64_t k = std::min(n - done, slots_);
      const Targets part = y.dense ? Targets::rows(y.dense + done * batch_ * classes_) : Targets(y.labels + done * batch_);
      const int bank = stage(x + done * batch_ * example_size_, part, k, batch_);
      CUDA_CHECK(cudaMemsetAsync(&scalars_->halted, 0, sizeof(int), compute_.get()));
      CUDA_CHECK(cudaMemsetAsync(&scalars_->steps_run, 0, sizeof(int), compute_.get()));
      run_training(bank, k, y.dense != nullptr);
      CUDA_CHECK(cudaEventRecord(consumed_[bank].get(), compute_.get()));
      const DeviceScalars s = read_scalars();
      step_finite_ = s.halted == 0;
      if (!step_finite_) return done + s.steps_run;
      done += k;
    }
    return n;
  }
  int64_t steps_per_call() const override { return slots_; }
  bool last_step_finite() const override { return step_finite_; }
  std::string nonfinite_report() const override {
    if (step_finite_) return "";
    return "the loss or the gradients (the CUDA backend does not say which layer; --device cpu does)";
  }

  double loss_and_gradients(const float* x, Targets y) override {
    check_targets(options_.loss, y, batch_, classes_);
    const int bank = stage(x, y, 1, batch_);
    enqueue_step(bank, 0, y.dense != nullptr, Step::gradients_only);
    CUDA_CHECK(cudaEventRecord(consumed_[bank].get(), compute_.get()));
    return read_scalars().step_loss / static_cast<double>(batch_);
  }

  void eval_step(const float* x, Targets y, int64_t count) override {
    require(count >= 0 && count <= batch_, "eval_step: count " + std::to_string(count) + " exceeds the batch size");
    check_targets(options_.loss, y, count, classes_);
    const int bank = stage(x, y, 1, count);
    const Slot s = slot(bank, 0);
    cudaStream_t st = compute_.get();
    // Inference is per-example: zero the rows past `count` and ignore them.
    const std::size_t row_bytes = sizeof(float) * example_size_;
    CUDA_CHECK(cudaMemcpyAsync(input_, s.x, row_bytes * count, cudaMemcpyDeviceToDevice, st));
    CUDA_CHECK(cudaMemsetAsync(input_ + count * example_size_, 0, row_bytes * (batch_ - count), st));
    for (auto& op : ops_) op->forward(ctx_, false);
    LossArgs a = loss_args(s, y.dense != nullptr, count);
    a.loss_sum = &scalars_->loss_sum;
    a.correct = &scalars_->correct;
    loss_forward(a, st);
    CUDA_CHECK(cudaEventRecord(consumed_[bank].get(), st));
    count_ += count;
  }

  Metrics take_metrics() override {
    const Metrics m = peek_metrics();
    CUDA_CHECK(cudaMemsetAsync(&scalars_->loss_sum, 0, sizeof(double), compute_.get()));
    CUDA_CHECK(cudaMemsetAsync(&scalars_->correct, 0, sizeof(unsigned long long), compute_.get()));
    CUDA_CHECK(cudaMemsetAsync(&scalars_->train_examples, 0, sizeof(unsigned long long), compute_.get()));
    count_ = 0;
    return m;
  }

  // Training steps count their examples on the device (a faulty step adds
  // none); evaluation counts on the host.
  Metrics peek_metrics() const override {
    const DeviceScalars s = read_scalars();
    return {.loss_sum = s.loss_sum, .correct = static_cast<int64_t>(s.correct),
            .count = count_ + static_cast<int64_t>(s.train_examples)};
  }

  void restore_metrics(const Metrics& m) override {
    const auto correct = static_cast<unsigned long long>(m.correct);
    const unsigned long long none = 0;
    to_device(&scalars_->loss_sum, &m.loss_sum, 1);
    to_device(&scalars_->correct, &correct, 1);
    to_device(&scalars_->train_examples, &none, 1);
    count_ = m.count;
  }

  void set_steps_done(int64_t steps) override { to_device(&scalars_->steps_done, &steps, 1); }

  void set_learning_rate(float lr) override {
    options_.optimizer.lr = lr;
    to_device(&scalars_->lr, &lr, 1);
  }
  float learning_rate() const override { return options_.optimizer.lr; }

  void set_profiling(bool on) override {
    profiling_ = on;
    if (!on) return;
    profiled_steps_ = 0;
    for (auto& p : profile_) p.forward_seconds = p.backward_seconds = 0;
    if (marks_.empty())
      for (std::size_t i = 0; i < 2 * ops_.size() + 2; ++i) marks_.push_back(make_event(true));
  }
  std::vector<LayerProfile> profile() const override { return profile_; }
  int64_t profiled_steps() const override { return profiled_steps_; }

  int64_t parameter_count() const override { return params_count_; }
  int64_t state_count() const override { return state_count_; }
  int64_t optimizer_state_size() const override { return optimizer_state_count_; }

  void set_parameters(std::span<const float> p) override { to_device(params_, p, params_count_, "parameters"); }
  void get_parameters(std::span<float> p) const override { to_host(p, params_, params_count_, "parameters"); }
  void get_gradients(std::span<float> g) const override { to_host(g, grads_, params_count_, "gradients"); }
  void set_state(std::span<const float> s) override { to_device(state_, s, state_count_, "state"); }
  void get_state(std::span<float> s) const override { to_host(s, state_, state_count_, "state"); }
  void set_optimizer_state(std::span<const float> s) override {
    to_device(optimizer_state_, s, optimizer_state_count_, "optimizer state");
  }
  void get_optimizer_state(std::span<float> s) const override {
    to_host(s, optimizer_state_, optimizer_state_count_, "optimizer state");
  }
  void get_output(std::span<float> out) const override { to_host(out, output_, batch_ * classes_, "output"); }
  void get_input_gradient(std::span<float> g) const override {
    require(d_input_ != nullptr, "input gradient: compile with input_gradient = true");
    to_host(g, d_input_, batch_ * example_size_, "input gradient");
  }

  // Only a reducer that works on the device will do: the gradients never
  // leave the GPU. Graphs captured so far lack (or hold) the reducer's work.
  void set_gradient_reducer(GradientReducer* reducer) override {
    auto* device = dynamic_cast<DeviceGradientReducer*>(reducer);
    require(reducer == nullptr || device != nullptr,
            device_name_ + " trains replicas only with --strategy nccl (collectives on the GPUs); --strategy mpi "
                           "trains its replicas on the CPU (--device cpu)");
    if (device) device->bind(gpu_, compute_.get());
    reducer_ = device;
    if (!reducer_) ctx_.sync_batch_norm = nullptr;
    forget_graphs();
  }

  // The statistics travel through the device reducer's sum_statistics: the
  // host function (the CPU's way) would need the sums copied out and back,
  // and a wait for the GPU, in every batch norm of every step.
  void set_batch_norm_reducer(StatisticsReducer reducer) override {
    require(!reducer || reducer_ != nullptr,
            device_name_ + ": synchronised batch norm on the GPU needs the replicas of --strategy nccl");
    ctx_.sync_batch_norm = reducer ? reducer_ : nullptr;
    forget_graphs();
  }

 private:
  // One batch's place in a bank: images, class indices and target rows.
  struct Slot {
    float* x;
    int32_t* labels;
    float* dense;
  };
  enum class Step { train, gradients_only };

  // --- compile time

  void allocate(const nn::Model& model, const GraphPlan& plan) {
    params_count_ = model.num_parameters();
    state_count_ = model.num_state();
    const std::vector<int64_t> runs = plan_trainable_runs(model);
    optimizer_state_count_ = optim::state_size(options_.optimizer, trainable_count_);
    int64_t discard_floats = 0;
    for (int64_t e : plan.elements) discard_floats = std::max(discard_floats, e);
    slot_x_bytes_ = aligned(sizeof(float) * batch_ * example_size_);
    slot_labels_bytes_ = aligned(sizeof(int32_t) * batch_);
    slot_bytes_ = slot_x_bytes_ + slot_labels_bytes_ + aligned(sizeof(float) * batch_ * classes_);

    // Offsets in bytes, then one allocation.
    int64_t cursor = 0;
    auto take = [&](int64_t bytes) {
      const int64_t at = cursor;
      cursor += aligned(bytes);
      return at;
    };
    const int64_t params = take(sizeof(float) * params_count_), grads = take(sizeof(float) * params_count_),
                  opt = take(sizeof(float) * optimizer_state_count_), state = take(sizeof(float) * state_count_),
                  state_before = take(sizeof(float) * state_count_),
                  scalars = take(sizeof(DeviceScalars)), activations = take(sizeof(float) * plan.floats),
                  discard = take(sizeof(float) * discard_floats), workspace = take(kWorkspaceBytes),
                  banks = take(2 * slots_ * slot_bytes_),
                  packed_params = take(gather_ ? sizeof(float) * trainable_count_ : 0),
                  packed_grads = take(gather_ ? sizeof(float) * trainable_count_ : 0),
                  run_table = take(sizeof(int64_t) * runs.size());
    std::vector<int64_t> own;
    for (const auto& op : ops_) own.push_back(take(static_cast<int64_t>(op->private_bytes())));

    void* base = nullptr;
    if (const cudaError_t e = cudaMalloc(&base, static_cast<std::size_t>(cursor)); e != cudaSuccess) {
      cudaGetLastError();
      std::size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw UserError("the model's device memory (" + std::to_string(cursor >> 20) + " MiB) does not fit on " +
                      device_name_ + " (" + std::to_string(free >> 20) + " MiB free: " + cudaGetErrorString(e) +
                      "); use a smaller --batch-size or steps_per_execution");
    }
    arena_.reset(base);
    // No NaN garbage anywhere. On the compute stream: it does not wait for
    // the legacy default stream, and everything after this runs on it.
    CUDA_CHECK(cudaMemsetAsync(base, 0, static_cast<std::size_t>(cursor), compute_.get()));
    char* at = static_cast<char*>(base);
    params_ = reinterpret_cast<float*>(at + params);
    grads_ = reinterpret_cast<float*>(at + grads);
    optimizer_state_ = reinterpret_cast<float*>(at + opt);
    state_ = reinterpret_cast<float*>(at + state);
    state_before_ = reinterpret_cast<float*>(at + state_before);
    scalars_ = reinterpret_cast<DeviceScalars*>(at + scalars);
    activations_ = reinterpret_cast<float*>(at + activations);
    discard_ = reinterpret_cast<float*>(at + discard);
    ctx_.workspace = at + workspace;
    ctx_.workspace_bytes = kWorkspaceBytes;
    banks_ = at + banks;
    packed_params_ = reinterpret_cast<float*>(at + packed_params);
    packed_grads_ = reinterpret_cast<float*>(at + packed_grads);
    runs_ = reinterpret_cast<int64_t*>(at + run_table);
    if (!runs.empty()) to_device(runs_, runs.data(), static_cast<int64_t>(runs.size()));
    for (int64_t o : own) own_.push_back(at + o);

    void* pinned = nullptr;
    CUDA_CHECK(cudaHostAlloc(&pinned, static_cast<std::size_t>(2 * slots_ * slot_bytes_), cudaHostAllocDefault));
    pinned_.reset(pinned);
    const float one = 1.0f;
    to_device(&scalars_->clip_scale, &one, 1);
  }

  // The trainable parameters as runs of the flat buffer (adjacent layers
  // merged), as the CPU's plan_updates. Sets trainable_count_ and gather_
  // (some parameter is frozen); returns the run table gather_runs reads:
  // the runs' flat starts, then their packed starts.
  std::vector<int64_t> plan_trainable_runs(const nn::Model& model) {
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

  void bind_ops(const nn::Model& model, const GraphPlan& plan) {
    auto at = [&](int64_t offset) { return offset < 0 ? nullptr : activations_ + offset; };
    const auto& layers = model.layers();
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto& layer = layers[i];
      OpBuffers b;
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
        b.params = params_ + layer.params[0].offset;
        b.grads = grads_ + layer.params[0].offset;
      }
      layer_grads_.emplace_back(b.grads, static_cast<std::size_t>(param_floats));
      if (!layer.state.empty()) b.state = state_ + layer.state[0].offset;
      b.discard = discard_;
      b.own = own_[i];
      b.steps_done = &scalars_->steps_done;
      ops_[i]->bind(ctx_, b);
    }
    for (const GradientSum& s : plan.sums) {
      Sum& sum = sums_.emplace_back();
      if (s.parts.empty()) continue;
      sum.into = at(s.into);
      sum.elements = s.elements;
      for (int64_t part : s.parts) sum.parts.push_back(at(part));
    }
    input_ = at(plan.activation[0]);
    d_input_ = at(plan.gradient[0]);
    output_ = at(plan.activation.back());
    d_output_ = at(plan.gradient.back());
  }

  // --- feeding

  Slot slot(int bank, int64_t i) const {
    char* s = banks_ + (bank * slots_ + i) * slot_bytes_;
    return {reinterpret_cast<float*>(s), reinterpret_cast<int32_t*>(s + slot_x_bytes_),
            reinterpret_cast<float*>(s + slot_x_bytes_ + slot_labels_bytes_)};
  }

  // Copies n batches of `rows` examples into the next bank's slots and makes
  // the compute stream wait for them. Returns the bank.
  int stage(const float* x, Targets y, int64_t n, int64_t rows) {
    const int bank = next_bank_;
    next_bank_ ^= 1;
    // The pinned bank is free once its previous upload is done.
    CUDA_CHECK(cudaEventSynchronize(copied_[bank].get()));
    char* host = static_cast<char*>(pinned_.get()) + bank * slots_ * slot_bytes_;
    for (int64_t i = 0; i < n; ++i) {
      char* s = host + i * slot_bytes_;
      std::memcpy(s, x + i * batch_ * example_size_, sizeof(float) * rows * example_size_);
      if (y.dense)
        std::memcpy(s + slot_x_bytes_ + slot_labels_bytes_, y.dense + i * batch_ * classes_,
                    sizeof(float) * rows * classes_);
      else
        std::memcpy(s + slot_x_bytes_, y.labels + i * batch_, sizeof(int32_t) * rows);
    }
    // The device bank is free once the steps that read it are done.
    CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), consumed_[bank].get(), 0));
    CUDA_CHECK(cudaMemcpyAsync(slot(bank, 0).x, host, static_cast<std::size_t>(n * slot_bytes_),
                               cudaMemcpyHostToDevice, copy_.get()));
    CUDA_CHECK(cudaEventRecord(copied_[bank].get(), copy_.get()));
    CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), copied_[bank].get(), 0));
    return bank;
  }

  // --- steps

  LossArgs loss_args(const Slot& s, bool dense, int64_t rows) const {
    LossArgs a;
    a.loss = loss_kind(options_.loss);
    a.smoothing = options_.label_smoothing;
    a.out = output_;
    a.labels = dense ? nullptr : s.labels;
    a.dense = dense ? s.dense : nullptr;
    a.rows = rows;
    a.cols = classes_;
    a.grad_rows = std::max<int64_t>(rows, 1);
    return a;
  }

  void run_training(int bank, int64_t n, bool dense) {
    if (options_.gpu.graphs && graphs_work_ && !profiling_) {
      if (cudaGraphExec_t g = graph_for(bank, n, dense)) {
        CUDA_CHECK(cudaGraphLaunch(g, compute_.get()));
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      if (profiling_) {
        profiled_step(bank, i, dense);
      } else {
        enqueue_step(bank, i, dense, Step::train);
      }
    }
  }

  // The graph of n training steps reading bank `bank`. The first execution
  // of each kind runs eagerly (null here): libraries and kernels load lazily,
  // and that first-use work must not happen inside a capture. The second
  // captures. Null also when capture fails: steps then run one by one (said once).
  cudaGraphExec_t graph_for(int bank, int64_t n, bool dense) {
    const auto key = std::make_tuple(bank, n, dense);
    if (auto it = graphs_.find(key); it != graphs_.end()) return it->second.get();
    if (ran_eagerly_.insert(key).second) return nullptr;
    cudaStream_t st = compute_.get();
    cudaGraph_t graph = nullptr;
    try {
      CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      try {
        for (int64_t i = 0; i < n; ++i) enqueue_step(bank, i, dense, Step::train);
      } catch (...) {
        cudaGraph_t partial = nullptr;
        cudaStreamEndCapture(st, &partial);
        if (partial) cudaGraphDestroy(partial);
        throw;
      }
      CUDA_CHECK(cudaStreamEndCapture(st, &graph));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      CUDA_CHECK(e);
      return graphs_.emplace(key, GraphExec(exec)).first->second.get();
    } catch (const std::exception& e) {
      cudaGetLastError();
      graphs_work_ = false;
      std::fprintf(stderr, "convoy: CUDA graph capture failed, running steps one by one: %s\n", e.what());
      return nullptr;
    }
  }

  // One step on slot i of `bank`: input copy, forward, loss, backward, and
  // (training) the optimizer update.
  void enqueue_step(int bank, int64_t i, bool dense, Step kind) {
    cudaStream_t st = compute_.get();
    const Slot s = slot(bank, i);
    if (kind == Step::train) begin_guarded_step(state_, state_before_, state_count_, scalars_, st);
    CUDA_CHECK(cudaMemcpyAsync(input_, s.x, sizeof(float) * batch_ * example_size_, cudaMemcpyDeviceToDevice, st));
    for (auto& op : ops_) op->forward(ctx_, true);
    loss_forward(step_loss_args(s, dense, kind), st);
    for (std::size_t k = ops_.size(); k-- > 0;) {
      sum_gradient(k + 1);
      ops_[k]->backward(ctx_);
      gradients_ready(k);
    }
    sum_gradient(0);
    if (reducer_) reducer_->finish({grads_, static_cast<std::size_t>(params_count_)});
    if (kind == Step::train) guarded_update();
  }

  // The numerical guard's verdict, then the update it allows (guard.cu).
  void guarded_update() {
    cudaStream_t st = compute_.get();
    finish_guarded_step(grads_, params_count_, state_, state_before_, state_count_, batch_, scalars_, st);
    update_parameters();
  }

  // The optimizer over the whole flat buffer, or, with frozen layers, over
  // the trainable parameters packed (optimizer_step then clips and decays
  // them alone; the frozen ones are never touched).
  void update_parameters() {
    cudaStream_t st = compute_.get();
    const OptimizerArgs args = optimizer_args(options_.optimizer);
    if (!gather_) return optimizer_step(args, params_, grads_, optimizer_state_, params_count_, scalars_, st);
    if (trainable_count_ == 0) return;
    gather_runs(params_, packed_params_, runs_, run_count_, trainable_count_, st);
    gather_runs(grads_, packed_grads_, runs_, run_count_, trainable_count_, st);
    optimizer_step(args, packed_params_, packed_grads_, optimizer_state_, trainable_count_, scalars_, st);
    scatter_runs(packed_params_, params_, runs_, run_count_, trainable_count_, st);
  }

  LossArgs step_loss_args(const Slot& s, bool dense, Step kind) {
    LossArgs a = loss_args(s, dense, batch_);
    a.d_out = d_output_;
    if (kind == Step::train) {  // committed to the metrics by the guard
      a.loss_sum = &scalars_->step_loss_sum;
      a.correct = &scalars_->step_correct;
    } else {
      a.step_loss = &scalars_->step_loss;
    }
    return a;
  }

  // The same step with timing events around every op (--profile).
  void profiled_step(int bank, int64_t i, bool dense) {
    cudaStream_t st = compute_.get();
    const Slot s = slot(bank, i);
    const std::size_t n = ops_.size();
    begin_guarded_step(state_, state_before_, state_count_, scalars_, st);
    CUDA_CHECK(cudaMemcpyAsync(input_, s.x, sizeof(float) * batch_ * example_size_, cudaMemcpyDeviceToDevice, st));
    for (std::size_t k = 0; k < n; ++k) {
      CUDA_CHECK(cudaEventRecord(marks_[k].get(), st));
      ops_[k]->forward(ctx_, true);
    }
    CUDA_CHECK(cudaEventRecord(marks_[n].get(), st));
    loss_forward(step_loss_args(s, dense, Step::train), st);
    for (std::size_t k = n; k-- > 0;) {
      CUDA_CHECK(cudaEventRecord(marks_[n + 1 + (n - 1 - k)].get(), st));
      sum_gradient(k + 1);
      ops_[k]->backward(ctx_);
      gradients_ready(k);
    }
    CUDA_CHECK(cudaEventRecord(marks_[2 * n + 1].get(), st));
    sum_gradient(0);
    if (reducer_) reducer_->finish({grads_, static_cast<std::size_t>(params_count_)});
    guarded_update();
    CUDA_CHECK(cudaEventSynchronize(marks_[2 * n + 1].get()));
    auto seconds = [&](std::size_t from, std::size_t to) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[from].get(), marks_[to].get()));
      return ms / 1000.0;
    };
    for (std::size_t k = 0; k < n; ++k) {
      profile_[k].forward_seconds += seconds(k, k + 1);
      const std::size_t start = n + 1 + (n - 1 - k);  // backward of op k starts here and ends at the next mark
      profile_[k].backward_seconds += seconds(start, start + 1);
    }
    ++profiled_steps_;
  }

  // Layer k's parameter gradients are enqueued: the reducer may start on them.
  void gradients_ready(std::size_t k) {
    if (reducer_ && !layer_grads_[k].empty()) reducer_->ready(layer_grads_[k]);
  }

  void forget_graphs() {
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));  // none may still run
    graphs_.clear();
    ran_eagerly_.clear();
  }

  // An activation read by several layers: its gradient is the sum of theirs.
  void sum_gradient(std::size_t a) {
    const Sum& g = sums_[a];
    if (g.parts.empty() || !g.into) return;
    add(g.parts[0], g.parts[1], g.into, g.elements, compute_.get());
    for (std::size_t k = 2; k < g.parts.size(); ++k) accumulate(g.into, g.parts[k], g.elements, compute_.get());
  }

  // --- host <-> device

  DeviceScalars read_scalars() const {
    DeviceScalars s{};
    CUDA_CHECK(cudaMemcpyAsync(&s, scalars_, sizeof s, cudaMemcpyDeviceToHost, compute_.get()));
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
    return s;
  }

  template <class T>
  void to_device(T* dst, const T* src, int64_t count) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(T) * count, cudaMemcpyHostToDevice, compute_.get()));
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));  // `src` may be gone after we return
  }

  void to_device(float* dst, std::span<const float> from, int64_t count, const char* what) {
    require(static_cast<int64_t>(from.size()) == count,
            std::string(what) + ": expected " + std::to_string(count) + " values, got " + std::to_string(from.size()));
    to_device(dst, from.data(), count);
  }

  void to_host(std::span<float> to, const float* src, int64_t count, const char* what) const {
    require(static_cast<int64_t>(to.size()) == count,
            std::string(what) + ": expected " + std::to_string(to.size()) + " values, got " + std::to_string(count));
    CUDA_CHECK(cudaMemcpyAsync(to.data(), src, sizeof(float) * count, cudaMemcpyDeviceToHost, compute_.get()));
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
  }

  CompileOptions options_;
  int64_t batch_, example_size_, classes_;
  int64_t slots_;  // batches per bank: steps_per_execution
  std::string device_name_;
  int gpu_ = 0;

  // Declared first, freed last: memory. Then the handles and streams that use it.
  std::unique_ptr<void, DeviceFree> arena_;
  std::unique_ptr<void, HostFree> pinned_;
  Stream compute_, copy_;
  std::unique_ptr<std::remove_pointer_t<cudnnHandle_t>, DnnDeleter> dnn_;
  std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, BlasDeleter> blas_;
  Event copied_[2], consumed_[2];
  std::vector<Event> marks_;  // profiling
  std::map<std::tuple<int, int64_t, bool>, GraphExec> graphs_;
  std::set<std::tuple<int, int64_t, bool>> ran_eagerly_;
  std::vector<std::unique_ptr<CudaOp>> ops_;

  CudaContext ctx_;
  int64_t params_count_ = 0, state_count_ = 0, optimizer_state_count_ = 0;
  float *params_ = nullptr, *grads_ = nullptr, *optimizer_state_ = nullptr, *state_ = nullptr;
  float* state_before_ = nullptr;  // the BN state before the current step (numerical guard)
  // Frozen layers: the trainable parameters' runs and their packed copies.
  bool gather_ = false;
  int64_t trainable_count_ = 0, run_count_ = 0;
  float *packed_params_ = nullptr, *packed_grads_ = nullptr;
  int64_t* runs_ = nullptr;  // on the device: run_count_ flat starts, then run_count_ packed starts
  DeviceScalars* scalars_ = nullptr;
  float *activations_ = nullptr, *discard_ = nullptr;
  float *input_ = nullptr, *d_input_ = nullptr, *output_ = nullptr, *d_output_ = nullptr;
  std::vector<void*> own_;
  char* banks_ = nullptr;
  int64_t slot_x_bytes_ = 0, slot_labels_bytes_ = 0, slot_bytes_ = 0;
  int next_bank_ = 0;
  struct Sum {
    float* into = nullptr;
    std::vector<const float*> parts;
    int64_t elements = 0;
  };
  std::vector<Sum> sums_;  // per activation
  std::vector<std::span<float>> layer_grads_;  // per layer: its slice of grads_ (empty without parameters)
  DeviceGradientReducer* reducer_ = nullptr;   // replicas: averages grads_ on the device

  int64_t count_ = 0;  // evaluated examples in the metrics since the last take (the sums live on the device)
  bool step_finite_ = true;
  bool graphs_work_ = true;
  bool profiling_ = false;
  int64_t profiled_steps_ = 0;
  std::vector<LayerProfile> profile_;
};

}  // namespace

std::unique_ptr<Executable> compile_cuda(const nn::Model& model, const CompileOptions& options, uint64_t seed) {
  if (const std::string why = cuda_unsupported(model); !why.empty())
    throw UserError(why + "; train this model on the CPU (--device cpu)");
  return std::make_unique<CudaExecutable>(model, options, seed);
}

}  // namespace convoy
