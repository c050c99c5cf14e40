// The CUDA device: cuDNN, cuBLAS and convoy's own kernels behind the device
// contract (backends/device.h); the Program (backends/program.h) runs the
// step. Everything is enqueued on one compute stream.
//
// Memory: one cudaMalloc at compile time holds the Program's regions (flat
// parameter, gradient, optimizer-state and BN-state buffers, the graph
// plan's activations and gradients, the device scalars), the ops' own
// memory, a workspace shared by cuDNN and cuBLAS and two banks of input
// slots. Nothing is allocated inside a step.
//
// Feeding: a batch is copied by the host into a pinned bank, then to the
// device bank by cudaMemcpyAsync on a copy stream; the compute stream waits on
// an event for it. The two banks alternate, so the next batch's copy overlaps
// the current step's compute, and the host blocks only when it is two calls
// ahead of the GPU. A step copies its slot's images into the input activation
// (one device-to-device copy, so every op stays bound to fixed memory).
//
// Captured steps are CUDA graphs. Replicas (the nccl strategy): only a
// DeviceGradientReducer will do, bound to the compute stream, so its
// collectives are ordered with (and captured with) the steps.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_op.h"
#include "backends/cuda/kernels.h"
#include "backends/device.h"
#include "backends/device_reducer.h"
#include "backends/program.h"
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
struct GraphDeleter {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDeleter>;
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDeleter>;
using GraphExec = std::unique_ptr<std::remove_pointer_t<cudaGraphExec_t>, GraphExecDeleter>;
using Graph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;

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

struct CudaGraph final : CapturedSteps {
  GraphExec exec;
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(const CompileOptions& options) : tf32_(options.gpu.tf32), gpu_(options.gpu.index) {
    const GpuReport& gpus = find_gpus(gpu_);  // gpu_: 0, or the replica's own GPU under the nccl strategy
    require(gpus.usable(), "no usable GPU: " + gpus.why_unusable + "; train on the CPU (--device cpu)");
    for (const GpuInfo& g : gpus.gpus)
      if (g.index == gpu_) name_ = "cuda:" + std::to_string(gpu_) + " (" + g.name + ")";
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
    CUDA_CHECK(cublasSetMathMode(blas, tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    for (int b = 0; b < 2; ++b) {
      copied_[b] = make_event(false);
      consumed_[b] = make_event(false);
    }
    ctx_.stream = compute_.get();
    ctx_.cudnn = dnn;
    ctx_.cublas = blas;
    ctx_.tf32 = tf32_;
  }

  ~CudaDevice() override {
    // Work still queued may touch the memory freed below.
    if (compute_) cudaStreamSynchronize(compute_.get());
    if (copy_) cudaStreamSynchronize(copy_.get());
  }

  std::string name() const override { return name_; }
  int64_t steps_per_call(const CompileOptions& options) const override {
    return std::max<int64_t>(options.steps_per_execution, 1);
  }

  void make_ops(const nn::Model& model, const DeviceShape& shape, const std::vector<uint64_t>& seeds) override {
    shape_ = shape;
    example_size_ = numel(shape.input);
    discard_floats_ = shape.batch * example_size_;
    for (std::size_t i = 0; i < model.layers().size(); ++i) {
      const auto& layer = model.layers()[i];
      ops_.push_back(make_cuda_op(layer, shape.batch, seeds[i]));
      discard_floats_ = std::max(discard_floats_, shape.batch * numel(layer.output_shape));
    }
  }
  bool is_view(std::size_t layer) const override { return ops_[layer]->is_view(); }
  int64_t align_floats() const override { return kAlignBytes / sizeof(float); }

  std::vector<void*> allocate(const std::vector<Region>& regions) override {
    const int64_t batch = shape_.batch;
    slot_x_bytes_ = aligned(sizeof(float) * batch * example_size_);
    slot_labels_bytes_ = aligned(sizeof(int32_t) * batch);
    slot_bytes_ = slot_x_bytes_ + slot_labels_bytes_ + aligned(sizeof(float) * batch * shape_.classes);
    // Offsets in bytes, then one allocation.
    int64_t cursor = 0;
    auto take = [&](int64_t bytes) {
      const int64_t at = cursor;
      cursor += aligned(bytes);
      return at;
    };
    std::vector<int64_t> program;
    for (const Region& r : regions) program.push_back(take(static_cast<int64_t>(r.bytes)));
    const int64_t discard = take(sizeof(float) * discard_floats_), workspace = take(kWorkspaceBytes),
                  banks = take(2 * shape_.slots * slot_bytes_);
    std::vector<int64_t> own;
    for (const auto& op : ops_) own.push_back(take(static_cast<int64_t>(op->private_bytes())));

    void* base = nullptr;
    if (const cudaError_t e = cudaMalloc(&base, static_cast<std::size_t>(cursor)); e != cudaSuccess) {
      cudaGetLastError();
      std::size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw UserError("the model's device memory (" + std::to_string(cursor >> 20) + " MiB) does not fit on " +
                      name_ + " (" + std::to_string(free >> 20) + " MiB free: " + cudaGetErrorString(e) +
                      "); use a smaller --batch-size or steps_per_execution");
    }
    arena_.reset(base);
    // No NaN garbage anywhere. On the compute stream: it does not wait for
    // the legacy default stream, and everything after this runs on it.
    CUDA_CHECK(cudaMemsetAsync(base, 0, static_cast<std::size_t>(cursor), compute_.get()));
    char* at = static_cast<char*>(base);
    discard_ = reinterpret_cast<float*>(at + discard);
    ctx_.workspace = at + workspace;
    ctx_.workspace_bytes = kWorkspaceBytes;
    CUDA_CHECK(cublasSetWorkspace(blas_.get(), ctx_.workspace, ctx_.workspace_bytes));
    banks_ = at + banks;
    for (int64_t o : own) own_.push_back(at + o);
    void* pinned = nullptr;
    CUDA_CHECK(cudaHostAlloc(&pinned, static_cast<std::size_t>(2 * shape_.slots * slot_bytes_), cudaHostAllocDefault));
    pinned_.reset(pinned);
    for (auto& e : consumed_) CUDA_CHECK(cudaEventRecord(e.get(), compute_.get()));
    for (auto& e : copied_) CUDA_CHECK(cudaEventRecord(e.get(), copy_.get()));
    std::vector<void*> pointers;
    for (int64_t o : program) pointers.push_back(at + o);
    return pointers;
  }

  void bind_edges(float* input, float* d_input) override {
    input_ = input;
    d_input_ = d_input;
  }

  void bind(std::size_t layer, OpBuffers b) override {
    b.discard = discard_;
    b.own = own_[layer];
    ops_[layer]->bind(ctx_, b);
  }

  // Convolutions timed their algorithms while binding: any error shows now.
  void finish_compile() override {
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
    CUDA_CHECK(cudaGetLastError());
  }

  void to_device(void* dst, const void* src, std::size_t bytes) override {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, compute_.get()));
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));  // `src` may be gone after we return
  }
  void to_host(void* dst, const void* src, std::size_t bytes) const override {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, compute_.get()));
    CUDA_CHECK(cudaStreamSynchronize(compute_.get()));
  }
  void zero(void* dst, std::size_t bytes) override {
    CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, compute_.get()));
  }
  bool all_finite(const float* values, int64_t n) const override {
    std::vector<float> host(static_cast<std::size_t>(n));
    to_host(host.data(), values, sizeof(float) * host.size());
    return std::all_of(host.begin(), host.end(), [](float v) { return std::isfinite(v); });
  }

  // Copies n batches of `rows` examples into the next bank's slots and makes
  // the compute stream wait for them.
  int stage(const float* x, Targets y, int64_t n, int64_t rows) override {
    const int64_t batch = shape_.batch, classes = shape_.classes;
    const int bank = next_bank_;
    next_bank_ ^= 1;
    // The pinned bank is free once its previous upload is done.
    CUDA_CHECK(cudaEventSynchronize(copied_[bank].get()));
    char* host = static_cast<char*>(pinned_.get()) + bank * shape_.slots * slot_bytes_;
    for (int64_t i = 0; i < n; ++i) {
      char* s = host + i * slot_bytes_;
      std::memcpy(s, x + i * batch * example_size_, sizeof(float) * rows * example_size_);
      if (y.dense)
        std::memcpy(s + slot_x_bytes_ + slot_labels_bytes_, y.dense + i * batch * classes,
                    sizeof(float) * rows * classes);
      else
        std::memcpy(s + slot_x_bytes_, y.labels + i * batch, sizeof(int32_t) * rows);
    }
    // The device bank is free once the steps that read it are done.
    CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), consumed_[bank].get(), 0));
    CUDA_CHECK(cudaMemcpyAsync(bank_slot(bank, 0), host, static_cast<std::size_t>(n * slot_bytes_),
                               cudaMemcpyHostToDevice, copy_.get()));
    CUDA_CHECK(cudaEventRecord(copied_[bank].get(), copy_.get()));
    CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), copied_[bank].get(), 0));
    return bank;
  }
  Slot slot(int bank, int64_t i) const override {
    const char* s = bank_slot(bank, i);
    return {reinterpret_cast<const float*>(s), reinterpret_cast<const int32_t*>(s + slot_x_bytes_),
            reinterpret_cast<const float*>(s + slot_x_bytes_ + slot_labels_bytes_)};
  }
  void release(int bank) override { CUDA_CHECK(cudaEventRecord(consumed_[bank].get(), compute_.get())); }

  void load_input(const float* x, int64_t rows) override {
    const std::size_t row_bytes = sizeof(float) * example_size_;
    cudaStream_t st = compute_.get();
    CUDA_CHECK(cudaMemcpyAsync(input_, x, row_bytes * rows, cudaMemcpyDeviceToDevice, st));
    if (rows < shape_.batch)
      CUDA_CHECK(cudaMemsetAsync(input_ + rows * example_size_, 0, row_bytes * (shape_.batch - rows), st));
  }
  void read_input_gradient(std::span<float> out) const override {
    to_host(out.data(), d_input_, sizeof(float) * out.size());
  }

  void forward(std::size_t layer, bool training) override { ops_[layer]->forward(ctx_, training); }
  void backward(std::size_t layer) override { ops_[layer]->backward(ctx_); }

  void loss(const LossCall& c) override {
    LossArgs a;
    a.loss = c.loss;
    a.smoothing = c.smoothing;
    a.out = c.out;
    a.labels = c.targets.labels;
    a.dense = c.targets.dense;
    a.rows = c.rows;
    a.cols = c.cols;
    a.grad_rows = c.grad_rows;
    a.d_out = c.d_out;
    a.step_loss = c.step_loss;
    a.loss_sum = c.loss_sum;
    a.correct = c.correct;
    loss_forward(a, compute_.get());
  }

  void sum(float* into, const std::vector<const float*>& parts, int64_t n) override {
    add(parts[0], parts[1], into, n, compute_.get());
    for (std::size_t k = 2; k < parts.size(); ++k) accumulate(into, parts[k], n, compute_.get());
  }

  void begin_guarded_step(float* state, float* state_before, int64_t state_n, DeviceScalars* s) override {
    cuda::begin_guarded_step(state, state_before, state_n, s, compute_.get());
  }
  void finish_guarded_step(const float* grads, int64_t n, float* state, const float* state_before, int64_t state_n,
                           int64_t batch, DeviceScalars* s) override {
    cuda::finish_guarded_step(grads, n, state, state_before, state_n, batch, s, compute_.get());
  }
  void optimizer_step(const optim::OptimizerOptions& opt, float* params, float* grads, float* state, int64_t n,
                      DeviceScalars* s) override {
    cuda::optimizer_step(opt, params, grads, state, n, s, compute_.get());
  }
  void gather_runs(const float* flat, float* packed, const int64_t* runs, int64_t count, int64_t packed_n) override {
    cuda::gather_runs(flat, packed, runs, count, packed_n, compute_.get());
  }
  void scatter_runs(const float* packed, float* flat, const int64_t* runs, int64_t count, int64_t packed_n) override {
    cuda::scatter_runs(packed, flat, runs, count, packed_n, compute_.get());
  }

  void prepare_marks(std::size_t count) override {
    while (marks_.size() < count) marks_.push_back(make_event(true));
    marks_used_ = count;
  }
  void mark(std::size_t k) override { CUDA_CHECK(cudaEventRecord(marks_[k].get(), compute_.get())); }
  std::vector<double> mark_seconds() override {
    CUDA_CHECK(cudaEventSynchronize(marks_[marks_used_ - 1].get()));
    std::vector<double> s;
    for (std::size_t k = 0; k + 1 < marks_used_; ++k) {
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[k].get(), marks_[k + 1].get()));
      s.push_back(ms / 1000.0);
    }
    return s;
  }

  bool can_capture() const override { return true; }
  void begin_capture() override {
    CUDA_CHECK(cudaStreamBeginCapture(compute_.get(), cudaStreamCaptureModeThreadLocal));
  }
  std::unique_ptr<CapturedSteps> end_capture(bool keep) override {
    cudaGraph_t raw = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(compute_.get(), &raw);
    Graph graph(raw);
    if (!keep || ended != cudaSuccess) {
      cudaGetLastError();  // the failed capture's error must not surface in later calls
      if (keep) CUDA_CHECK(ended);
      return nullptr;
    }
    cudaGraphExec_t exec = nullptr;
    if (const cudaError_t e = cudaGraphInstantiate(&exec, graph.get(), 0); e != cudaSuccess) {
      cudaGetLastError();
      CUDA_CHECK(e);
    }
    auto steps = std::make_unique<CudaGraph>();
    steps->exec.reset(exec);
    return steps;
  }
  void launch(CapturedSteps& steps) override {
    CUDA_CHECK(cudaGraphLaunch(static_cast<CudaGraph&>(steps).exec.get(), compute_.get()));
  }
  void synchronize() override { CUDA_CHECK(cudaStreamSynchronize(compute_.get())); }

  // Only a reducer that works on the device will do: the gradients never
  // leave the GPU.
  void accept_gradient_reducer(GradientReducer* reducer) override {
    if (!bind_device_reducer(reducer, gpu_, compute_.get(), name_)) ctx_.sync_batch_norm = nullptr;
  }

  // The statistics travel through the device reducer's sum_statistics: the
  // host function (the CPU's way) would need the sums copied out and back,
  // and a wait for the GPU, in every batch norm of every step.
  void set_batch_norm_reducer(StatisticsReducer reducer, GradientReducer* gradient_reducer) override {
    require(!reducer || gradient_reducer != nullptr,
            name_ + ": synchronised batch norm on the GPU needs the replicas of --strategy nccl");
    ctx_.sync_batch_norm = reducer ? dynamic_cast<DeviceGradientReducer*>(gradient_reducer) : nullptr;
  }

 private:
  char* bank_slot(int bank, int64_t i) const { return banks_ + (bank * shape_.slots + i) * slot_bytes_; }

  bool tf32_;
  std::string name_;
  int gpu_ = 0;
  DeviceShape shape_;
  int64_t example_size_ = 0, discard_floats_ = 0;

  // Declared first, freed last: memory. Then the handles and streams that use it.
  std::unique_ptr<void, DeviceFree> arena_;
  std::unique_ptr<void, HostFree> pinned_;
  Stream compute_, copy_;
  std::unique_ptr<std::remove_pointer_t<cudnnHandle_t>, DnnDeleter> dnn_;
  std::unique_ptr<std::remove_pointer_t<cublasHandle_t>, BlasDeleter> blas_;
  Event copied_[2], consumed_[2];
  std::vector<Event> marks_;  // profiling
  std::size_t marks_used_ = 0;
  std::vector<std::unique_ptr<CudaOp>> ops_;

  CudaContext ctx_;
  float *discard_ = nullptr, *input_ = nullptr, *d_input_ = nullptr;
  std::vector<void*> own_;
  char* banks_ = nullptr;
  int64_t slot_x_bytes_ = 0, slot_labels_bytes_ = 0, slot_bytes_ = 0;
  int next_bank_ = 0;
};

}  // namespace

std::unique_ptr<Executable> compile_cuda(const nn::Model& model, const CompileOptions& options, uint64_t seed) {
  if (const std::string why = cuda_unsupported(model); !why.empty())
    throw UserError(why + "; train this model on the CPU (--device cpu)");
  require_fp32(options.precision, "CUDA");
  return std::make_unique<Program>(model, options, seed, std::make_unique<CudaDevice>(options));
}

}  // namespace convoy
