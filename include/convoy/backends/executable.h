#pragma once
// The backend interface. compile() turns a model into an Executable: a fixed
// schedule of kernels over memory planned once, with all parameters, their
// gradients and the optimizer state each in one contiguous buffer. Nothing is
// allocated inside a step. Host data goes in and out through plain spans in
// the model's canonical layouts (NCHW, PyTorch's parameter order), so the
// trainer, checkpoints and tests never see a backend's internal layouts.
// Executable is what a model's user calls; executable_internals.h is the
// rest, for the training loop, replicas, checkpoints and tests.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "convoy/backends/loss.h"
#include "convoy/core/cpu_info.h"
#include "convoy/core/error.h"
#include "convoy/nn/model.h"
#include "convoy/optim/optimizer.h"

namespace convoy {

// What a batch is compared with: class indices [batch] (sparse, Keras's
// sparse_categorical_crossentropy) or dense rows [batch, classes] (one-hot,
// soft or multi-hot targets). A plain `const int32_t*` converts to sparse.
struct Targets {
  const int32_t* labels = nullptr;
  const float* dense = nullptr;
  Targets(const int32_t* class_indices) : labels(class_indices) {}  // NOLINT: implicit on purpose
  static Targets rows(const float* dense_rows) {
    Targets t(nullptr);
    t.dense = dense_rows;
    return t;
  }
};

// CPU only: the algorithm of 3x3 stride-1 convolutions (backends/cpu/winograd_conv.h),
// and of stride-1 convolutions with few channels (backends/cpu/direct_conv.h).
// automatic: Winograd, or our direct kernels, where a fixed rule says they
// win, oneDNN's direct kernels elsewhere; direct: oneDNN everywhere;
// winograd: Winograd wherever it suits. The choice changes the result's
// bits: record it with them.
enum class ConvAlgo { automatic, direct, winograd };
// "auto", "direct", "winograd"; UserError naming them otherwise.
ConvAlgo parse_conv_algo(const std::string& name);
const char* conv_algo_name(ConvAlgo algo);

// CPU only: how a training step uses several threads. per_op: every op is
// split across the threads, a barrier after each; batch_slices: each thread
// runs its own slice of the batch through the whole step and the slices'
// gradients are summed once per step, in slice order (backends/batch_slices.h);
// automatic: batch_slices where a fixed rule says the ops are too small to
// split, per_op elsewhere. Slices change the result's bits: record the choice.
enum class Parallelism { automatic, per_op, batch_slices };
// "auto", "per_op", "batch_slices"; UserError naming them otherwise.
Parallelism parse_parallelism(const std::string& name);
// What convolutions and dense layers multiply in. fp32: everything in fp32.
// bf16 (CPU with AVX512-BF16 only; cpu_bf16_missing in backends/devices.h):
// their inputs and weights rounded to bfloat16, sums, outputs and gradients in
// fp32; master weights, optimizer state and every other layer stay fp32.
enum class Precision { fp32, bf16 };
// "fp32", "bf16"; UserError naming them otherwise.
Precision parse_precision(const std::string& name);
const char* precision_name(Precision precision);
// For a backend that trains in fp32 only: UserError naming `device` for bf16.
void require_fp32(Precision precision, const std::string& device);

struct CompileOptions {
  int64_t batch_size = 128;
  Loss loss = Loss::nll;
  // Targets t become t * (1 - s) + s / classes (s / 2 for binary cross-entropy),
  // as Keras's and PyTorch's label_smoothing.
  float label_smoothing = 0;
  optim::OptimizerOptions optimizer;
  bool input_gradient = false;  // also compute d loss / d input (gradient checks)
  // The most batches one train_steps call takes (Keras's steps_per_execution);
  // a GPU keeps room on the device for that many.
  int64_t steps_per_execution = 1;
  // CPU only: which compiled copy of convoy's own kernels runs (core/cpu_info.h);
  // automatic picks the best this CPU runs. Recorded in summary.json.
  KernelSet cpu_kernels = KernelSet::automatic;
  ConvAlgo conv_algo = ConvAlgo::automatic;  // CPU only, see ConvAlgo
  Parallelism parallelism = Parallelism::automatic;  // CPU only, see Parallelism
  // CPU only for bf16: the CUDA and PJRT backends refuse it with a UserError.
  Precision precision = Precision::fp32;
  // GPU only (the CPU ignores them).
  struct Gpu {
    // Which GPU, by CUDA's index (after CUDA_VISIBLE_DEVICES): choose_device's
    // (the strategy's: under nccl each replica's own GPU, dist::Strategy::gpu).
    int index = 0;
    bool tf32 = true;    // TF32 tensor cores for convolutions and dense layers; off: plain fp32
    bool graphs = true;  // run training steps as captured CUDA graphs
  } gpu;
  // PJRT only (other backends ignore it; the trainer allows replicas > 1 only
  // on a PJRT device): data parallelism inside the
  // program (backends/pjrt/pjrt_device.h). batch_size is the global batch,
  // split into `replicas` equal contiguous parts, one per device.
  struct Pjrt {
    // The plugin file (choose_device finds it for a device name); empty: the
    // one --device pjrt finds.
    std::string plugin;
    int replicas = 1;
    bool sync_batch_norm = false;  // batch statistics over all replicas' parts
  } pjrt;
};

// Where a training step's time went, per layer (`convoy train --profile`).
struct LayerProfile {
  std::string name;  // e.g. "conv2d_0"
  // Summed over profiled training steps; NaN when the device cannot time
  // layers (it runs each step as one fused module).
  double forward_seconds = 0, backward_seconds = 0;
  double forward_flops = 0, backward_flops = 0;      // per step (multiply-adds count 2)
  // Non-empty: the device runs this layer's work inside that layer's op
  // (fused), so its time is counted there and its own is ~0.
  std::string runs_in;
};

// Sums over the steps since the metrics were last read with Metrics::reset.
struct Metrics {
  // What reading them (Executable::metrics) does to the running sums:
  // keep_running (progress bars, NaN checks) or reset (an epoch's end).
  enum Then { keep_running, reset };
  double loss_sum = 0;  // sum of per-example losses
  // Examples predicted right: arg-max output = label (or = arg-max of a dense
  // target row); for binary cross-entropy, every class's (logit > 0) equals
  // (target >= 0.5) — exact-match accuracy, as sklearn's for multi-label.
  int64_t correct = 0;
  int64_t count = 0;
  double mean_loss() const { return count ? loss_sum / count : 0.0; }
  double accuracy() const { return count ? static_cast<double>(correct) / count : 0.0; }
};

// A model's learned values in its canonical order and layouts: what a
// checkpoint keeps and what carries a model from one compile to the next.
struct Weights {
  std::vector<float> parameters;       // nn::Model's flat parameter order (PyTorch's)
  std::vector<float> state;            // batch norm running statistics
  std::vector<float> optimizer_state;  // optim::state_size floats
};

class ExecutableInternals;  // the training loop's and dist's side (executable_internals.h)

// What an executable was compiled for and on (Executable::compiled_for).
struct CompiledFor {
  std::string device;       // "cpu", "cuda:0", "pjrt:cpu", ...
  int64_t batch_size = 0;   // examples per step
  int64_t input_size = 0;   // per example: floats of [input_shape...]
  int64_t output_size = 0;  // per example: the number of classes
  // How many batches train_steps takes at once to good effect: 1 on the CPU
  // (fit then hands it batches one at a time), steps_per_execution on a GPU.
  int64_t steps_per_call = 1;
};

// What a model's user calls. The plumbing that the training loop, replicas,
// checkpoints and tests need (flat buffer copies, resume, profiling, replica
// hooks) is behind internals().
class Executable {
 public:
  virtual ~Executable() = default;

  virtual const CompiledFor& compiled_for() const = 0;

  // x: [batch, input_shape...] floats, y: the batch's targets.
  // Forward in training mode, loss, backward, optimizer update; adds to metrics.
  virtual void train_step(const float* x, Targets y) = 0;
  // Up to n training steps on n consecutive batches: x holds n * batch
  // examples, y their targets in order. The same as train_step calls (this
  // default) that stop after the first step that was not finite (see
  // last_step_finite); returns how many steps ran. The GPU runs them as one
  // CUDA graph; there n is at most the compile option steps_per_execution
  // (compiled_for().steps_per_call says how many to hand it).
  virtual int64_t train_steps(const float* x, Targets y, int64_t n);
  // The numerical guard (docs/reliability.md). Before its optimizer update,
  // a training step checks the loss and the whole flat gradient buffer for
  // NaN and Inf in one fused pass. When anything is not finite the step
  // changes nothing: no update, BN running statistics and metrics as they
  // were; and last_step_finite() is false until the next training step
  // (internals().nonfinite_report() then says where it first showed).
  virtual bool last_step_finite() const = 0;
  // Forward in inference mode on the first `count` (<= batch) examples; adds to
  // metrics. Rows past `count` are ignored (inference is per-example).
  virtual void eval_step(const float* x, Targets y, int64_t count) = 0;

  // The sums since they were last reset; `then` says whether to start new
  // ones (Metrics::reset) or leave them running (Metrics::keep_running).
  virtual Metrics metrics(Metrics::Then then) = 0;

  virtual float learning_rate() const = 0;
  virtual void set_learning_rate(float lr) = 0;

  // Copies of the weights out, and in: a part left empty is left as it is
  // (say, weights without optimizer state from another compile).
  Weights weights() const;
  void set_weights(const Weights& weights);

  virtual ExecutableInternals& internals() = 0;
  const ExecutableInternals& internals() const { return const_cast<Executable*>(this)->internals(); }
};

// Compiles for the CPU (oneDNN). Parameters start from model.initial_parameters(seed).
std::unique_ptr<Executable> compile_cpu(const nn::Model& model, const CompileOptions& options,
                                        uint64_t seed);
// Compiles for CUDA GPU options.gpu.index (cuDNN, cuBLAS, own kernels). Throws
// UserError saying why when no GPU is usable (see backends/devices.h).
std::unique_ptr<Executable> compile_cuda(const nn::Model& model, const CompileOptions& options,
                                         uint64_t seed);
// Compiles whole training and evaluation steps as StableHLO for the PJRT
// plugin options.pjrt.plugin (see choose_device, backends/devices.h) and runs
// them on its first device. Throws UserError naming what it lacks.
std::unique_ptr<Executable> compile_pjrt(const nn::Model& model, const CompileOptions& options,
                                         uint64_t seed);

}  // namespace convoy
