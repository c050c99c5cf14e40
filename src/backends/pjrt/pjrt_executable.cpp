// The PJRT Executable: one compiled StableHLO program per kind of step
// (stablehlo_step.h) on the selected plugin's client: its first device, or
// one device per replica.
// Parameters, optimizer state and running statistics live on the device
// between steps: the training program takes them donated and returns their
// successors, so a step moves only the batch in and three numbers out
// (loss sum, correct count, finite flag). Everything else (gradients,
// outputs, the buffers themselves) is downloaded only when asked for.
//
// Dropout: the host draws the CPU backend's masks (the formula in
// backends/dropout_mask.h, which every backend shares) and passes
// them in, so a PJRT run drops exactly the elements a CPU run drops.
#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "backends/buffer_sizes.h"
#include "backends/dropout_mask.h"
#include "backends/pjrt/host_masks.h"
#include "backends/pjrt/pjrt_device.h"
#include "backends/pjrt/plugin.h"
#include "backends/pjrt/stablehlo_step.h"
#include "backends/targets.h"
#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/core/error.h"

namespace convoy {
namespace {

using pjrt::Buffer;

Shape with_batch(int64_t batch, const Shape& s) {
  Shape out{batch};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

// Replicas (CompileOptions::pjrt): the programs run on R devices at once.
// The host splits each global batch into R contiguous parts of batch / R rows
// (replica r gets rows [r * part, (r + 1) * part)), and every replica keeps its
// own copy of parameters, optimizer state and running statistics, which the
// programs keep identical (stablehlo_step.h); whatever is read back comes
// from replica 0. Dropout masks are drawn for the global batch, as one CPU
// executable of that batch draws them, and split the same way.
class PjrtExecutable final : public Executable, public ExecutableInternals {
 public:
  PjrtExecutable(const nn::Model& model, const CompileOptions& options, uint64_t seed, pjrt::Client& client)
      : client_(client), model_(model), options_(options), seed_(seed),
        example_size_(numel(model.input_shape())), classes_(model.output_shape().at(0)),
        replicas_(options.pjrt.replicas) {
    require(options.batch_size >= 1, "batch size must be at least 1, got " + std::to_string(options.batch_size));
    require(replicas_ >= 1, "--replicas must be at least 1, got " + std::to_string(replicas_));
    require(options.batch_size % replicas_ == 0, "batch size " + std::to_string(options.batch_size) +
                                                     " does not split into " + std::to_string(replicas_) + " replicas");
    part_ = options.batch_size / replicas_;
    const std::string why = pjrt::pjrt_unsupported(model, options);
    require(why.empty(), "--device pjrt: " + why + "; train this model on the CPU (--device cpu)");
    step_options_ = {.batch = part_, .loss = options.loss, .label_smoothing = options.label_smoothing,
                     .optimizer = options.optimizer, .replicas = replicas_,
                     .sync_batch_norm = options.pjrt.sync_batch_norm};
    train_ = compile(pjrt::emit_train_module(model, step_options_));
    eval_ = compile(pjrt::emit_eval_module(model, step_options_));
    opt_floats_ = optim::state_size(options.optimizer, model.num_parameters());
    write(Held::parameters, model.initial_parameters(seed));
    write(Held::state, model.initial_state());
    write(Held::optimizer_state, std::vector<float>(opt_floats_, 0.0f));
    for (std::size_t i = 0; i < model.layers().size(); ++i)
      if (auto* d = std::get_if<nn::Dropout>(&model.layers()[i].layer))
        dropouts_.push_back({i, d->rate, dropout_layer_seed(seed, i),
                             with_batch(options.batch_size, model.layers()[i].output_shape)});
    compiled_for_ = {.device = "pjrt:" + client_.platform(), .batch_size = options.batch_size,
                     .input_size = example_size_, .output_size = classes_,
                     .steps_per_call = options.steps_per_execution};
  }

  const CompiledFor& compiled_for() const override { return compiled_for_; }

  void train_step(const float* x, Targets y) override {
    Inputs in = batch_inputs(x, y, batch_size());
    add_lr(in);
    add_masks(in);
    auto out = run(*train_, {&params_, &opt_, &state_}, in);
    take_step_outputs(out);
    add_step(stats(out[0][3]).data());
  }

  // steps_per_execution batches as one program (a loop on the device); a
  // shorter run (an epoch's tail) goes step by step.
  int64_t train_steps(const float* x, Targets y, int64_t n) override {
    const int64_t steps = options_.steps_per_execution;
    if (steps == 1 || n != steps) return Executable::train_steps(x, y, n);
    if (!train_many_) {
      pjrt::StepOptions o = step_options_;
      o.steps = steps;
      train_many_ = compile(pjrt::emit_train_module(model_, o));
    }
    Inputs in = batch_inputs(x, y, batch_size(), steps);
    add_lr(in);
    add_masks(in, steps);
    auto out = run(*train_many_, {&params_, &opt_, &state_}, in);
    take_step_outputs(out);
    std::vector<float> rows(steps * 3);
    client_.download(out[0][3], rows.data(), rows.size() * sizeof(float));
    for (int64_t i = 0; i < steps; ++i) {
      add_step(&rows[i * 3]);
      if (!step_finite_) return i + 1;
    }
    return steps;
  }

  double loss_and_gradients(const float* x, Targets y) override {
    if (!gradients_) gradients_ = compile(pjrt::emit_gradients_module(model_, step_options_));
    Inputs in = batch_inputs(x, y, batch_size());
    add_masks(in);
    auto out = run(*gradients_, {&params_, &state_}, in);
    for (int r = 0; r < replicas_; ++r) {
      state_[r] = std::move(out[r][0]);  // donated: a training-mode forward moves the running statistics (as the CPU's)
      grads_[r] = std::move(out[r][2]);
      output_[r] = std::move(out[r][3]);
    }
    return stats(out[0][1])[0] / static_cast<double>(batch_size());
  }

  void eval_step(const float* x, Targets y, int64_t count) override {
    const int64_t n = batch_size();
    require_eval_count(count, n);
    Inputs in = batch_inputs(x, y, count);
    for (int r = 0; r < replicas_; ++r) {  // each replica's rows before `count`
      const auto rows = static_cast<int32_t>(std::clamp<int64_t>(count - r * part_, 0, part_));
      in[r].push_back(client_.upload(std::span<const int32_t>(&rows, 1), {}, device_of(r)));
    }
    auto out = run(*eval_, {&params_, &state_}, in);
    for (int r = 0; r < replicas_; ++r) output_[r] = std::move(out[r][1]);
    const auto s = stats(out[0][0]);
    metrics_.loss_sum += s[0];
    metrics_.correct += static_cast<int64_t>(s[1]);
    metrics_.count += count;
  }

  Metrics metrics(Metrics::Then then) override {
    return then == Metrics::reset ? std::exchange(metrics_, {}) : metrics_;
  }
  void restore_metrics(const Metrics& m) override { metrics_ = m; }
  void set_steps_done(int64_t steps) override { steps_done_ = steps; }
  bool last_step_finite() const override { return step_finite_; }
  std::string nonfinite_report() const override {
    // The whole step is one program: what was not finite is known only as a whole.
    return step_finite_ ? "" : "the loss or a gradient (the PJRT backend runs the step as one program and "
                               "does not say which layer; rerun on --device cpu to find it)";
  }
  void set_learning_rate(float lr) override { options_.optimizer.lr = lr; }
  float learning_rate() const override { return options_.optimizer.lr; }

  // No per-layer clock inside a compiled program.
  void set_profiling(bool) override {}
  std::vector<LayerProfile> profile() const override { return {}; }
  int64_t profiled_steps() const override { return 0; }

  ExecutableInternals& internals() override { return *this; }
  int64_t size(Held held) const override {
    switch (held) {
      case Held::parameters:
      case Held::gradients: return parameter_count();
      case Held::state: return state_count();
      case Held::optimizer_state: return optimizer_state_size();
      case Held::output: return batch_size() * classes_;
      case Held::input_gradient: return batch_size() * example_size_;
    }
    return 0;
  }
  void read(Held held, std::span<float> to) const override {
    if (held == Held::input_gradient)
      throw UserError("input gradient: the PJRT backend does not compute it; use the CPU backend");
    if (held == Held::output) return read_output(to);
    if (held == Held::gradients && !grads_[0]) {  // no step has run yet
      require_room(to.size(), size(held), held_name(held));
      return std::fill(to.begin(), to.end(), 0.0f);
    }
    download_flat(this->*kept(held), to, size(held), held_name(held));
  }
  void write(Held held, std::span<const float> from) override {
    require_writable(held);
    upload_flat(this->*kept(held), from, size(held), held_name(held));
  }
  void set_gradient_reducer(GradientReducer* reducer) override {
    require(reducer == nullptr, compiled_for_.device + ": this backend cannot train as one of several replicas");
  }
  void set_batch_norm_reducer(StatisticsReducer reducer) override {
    require(!reducer, compiled_for_.device + ": this backend has no synchronised batch norm");
  }

  int64_t batch_size() const { return options_.batch_size; }
  int64_t parameter_count() const { return model_.num_parameters(); }
  int64_t state_count() const { return model_.num_state(); }
  int64_t optimizer_state_size() const { return opt_floats_; }

 private:
  struct DropoutLayer {
    std::size_t index;
    float rate;
    uint64_t seed;
    Shape shape;  // [global batch, ...]
  };
  using Copies = std::vector<Buffer>;        // one buffer per replica
  using Inputs = std::vector<std::vector<Buffer>>;  // per replica: the arguments after the kept buffers

  // The buffers kept on the device for a flat part (Program::flat's
  // counterpart): one copy per replica.
  static Copies PjrtExecutable::*kept(Held held) {
    switch (held) {
      case Held::parameters: return &PjrtExecutable::params_;
      case Held::gradients: return &PjrtExecutable::grads_;
      case Held::state: return &PjrtExecutable::state_;
      default: return &PjrtExecutable::opt_;  // optimizer_state; output and input_gradient are read apart
    }
  }
  void read_output(std::span<float> out) const {
    require_room(out.size(), batch_size() * classes_, "output");
    if (!output_[0]) return std::fill(out.begin(), out.end(), 0.0f);
    const int64_t part = part_ * classes_;
    for (int r = 0; r < replicas_; ++r)  // each replica's rows, in order
      client_.download(output_[r], out.data() + r * part, part * sizeof(float));
  }

  // A program for this executable's replicas; all of them place replica r
  // on the same device (the buffers kept between calls live there).
  std::unique_ptr<pjrt::Program> compile(const std::string& mlir) {
    auto program = client_.compile(mlir, replicas_);
    if (devices_.empty()) devices_ = program->devices();
    if (program->devices() != devices_) throw std::logic_error("pjrt: programs of one executable on different devices");
    return program;
  }
  int device_of(int replica) const { return devices_[replica]; }

  // Runs `program` on every replica: its kept buffers (params, ...) first,
  // then in[r]. Kept buffers the program donates are consumed (the caller
  // replaces them with the program's results).
  std::vector<std::vector<Buffer>> run(pjrt::Program& program, const std::vector<Copies*>& kept, const Inputs& in) {
    std::vector<std::vector<PJRT_Buffer*>> args(replicas_);
    for (int r = 0; r < replicas_; ++r) {
      for (const Copies* k : kept) args[r].push_back((*k)[r].get());
      for (const auto& b : in[r]) args[r].push_back(b.get());
    }
    return client_.execute(program, args);
  }

  // The buffers a training program returns (stablehlo_step.h's order). The
  // first three arguments were donated: their successors replace them.
  void take_step_outputs(std::vector<std::vector<Buffer>>& out) {
    for (int r = 0; r < replicas_; ++r) {
      params_[r] = std::move(out[r][0]);
      opt_[r] = std::move(out[r][1]);
      state_[r] = std::move(out[r][2]);
      grads_[r] = std::move(out[r][4]);
      output_[r] = std::move(out[r][5]);
    }
  }

  // One step's stats row (summed over replicas): loss sum, correct count, finite flag.
  void add_step(const float* s) {
    step_finite_ = s[2] != 0;
    if (!step_finite_) return;
    metrics_.loss_sum += s[0];
    metrics_.correct += static_cast<int64_t>(s[1]);
    metrics_.count += batch_size();
    ++steps_done_;
  }

  // Uploads replica r's part of `steps` stacked global batches of `width`
  // floats per row, as [steps, part, shape...].
  Buffer upload_part(const float* all, int64_t width, int64_t steps, int r, Shape shape) {
    shape.insert(shape.begin(), part_);
    if (steps > 1) shape.insert(shape.begin(), steps);
    const int64_t part = part_ * width;
    if (replicas_ == 1) return client_.upload(std::span<const float>(all, steps * part), shape, device_of(0));
    part_staging_.resize(steps * part);
    for (int64_t k = 0; k < steps; ++k)
      std::memcpy(part_staging_.data() + k * part, all + (k * replicas_ + r) * part, sizeof(float) * part);
    return client_.upload(part_staging_, shape, device_of(r));
  }

  // x (the first `rows` examples; the rest zeros) and the targets as dense
  // rows; `steps` batches stacked ([steps, batch, ...]) when more than one;
  // each replica's part.
  Inputs batch_inputs(const float* x, Targets y, int64_t rows, int64_t steps = 1) {
    const int64_t n = batch_size();
    check_targets(options_.loss, y, steps == 1 ? rows : steps * n, classes_);
    if (rows != n) {
      staging_.assign(n * example_size_, 0.0f);
      std::memcpy(staging_.data(), x, sizeof(float) * rows * example_size_);
      x = staging_.data();
    }
    const int64_t all_rows = steps == 1 ? rows : steps * n;
    targets_.assign(steps * n * classes_, 0.0f);
    if (y.dense)
      std::memcpy(targets_.data(), y.dense, sizeof(float) * all_rows * classes_);
    else
      for (int64_t i = 0; i < all_rows; ++i) targets_[i * classes_ + y.labels[i]] = 1.0f;
    Inputs in(replicas_);
    for (int r = 0; r < replicas_; ++r) {
      in[r].push_back(upload_part(x, example_size_, steps, r, model_.input_shape()));
      in[r].push_back(upload_part(targets_.data(), classes_, steps, r, {classes_}));
    }
    return in;
  }

  void add_lr(Inputs& in) {
    const float lr = options_.optimizer.lr;
    for (int r = 0; r < replicas_; ++r) in[r].push_back(client_.upload(std::span<const float>(&lr, 1), {}, device_of(r)));
  }

  // The dropout masks of the next `steps` steps, drawn as the CPU backend
  // draws them for the global batch (stacked when more than one), each
  // replica's part to it.
  void add_masks(Inputs& in, int64_t steps = 1) {
    for (const auto& d : dropouts_) {
      const int64_t n = d.shape[0], per = numel(d.shape) / n;
      const Shape example(d.shape.begin() + 1, d.shape.end());
      mask_.resize(steps * n * per);
      for (int64_t k = 0; k < steps; ++k)
        pjrt::draw_dropout_masks(std::span<float>(mask_).subspan(k * n * per, n * per), example, d.rate, d.seed,
                                 steps_done_ + k, n);
      for (int r = 0; r < replicas_; ++r) in[r].push_back(upload_part(mask_.data(), per, steps, r, example));
    }
  }

  std::array<float, 3> stats(const Buffer& b) const {
    std::array<float, 3> s{};
    client_.download(b, s.data(), sizeof s);
    return s;
  }

  // A flat buffer to every replica's device.
  void upload_flat(Copies& to, std::span<const float> v, int64_t floats, const char* what) {
    require_values(v.size(), floats, what);
    std::vector<float> padded(v.begin(), v.end());
    padded.resize(pjrt::device_length(floats), 0.0f);
    const std::vector<int64_t> dims{pjrt::device_length(floats)};
    for (int r = 0; r < replicas_; ++r) to[r] = client_.upload(padded, dims, device_of(r));
  }

  // Replica 0's copy (the programs keep them identical).
  void download_flat(const Copies& from, std::span<float> out, int64_t floats, const char* what) const {
    require_room(out.size(), floats, what);
    std::vector<float> all(pjrt::device_length(floats));
    client_.download(from[0], all.data(), all.size() * sizeof(float));
    std::copy_n(all.begin(), floats, out.begin());
  }

  pjrt::Client& client_;
  nn::Model model_;
  CompileOptions options_;
  pjrt::StepOptions step_options_;
  uint64_t seed_;
  int64_t example_size_, classes_, opt_floats_ = 0;
  int replicas_;
  int64_t part_ = 0;  // rows per replica
  std::vector<int> devices_;  // replica r's device on the client
  CompiledFor compiled_for_;
  std::unique_ptr<pjrt::Program> train_, eval_, gradients_, train_many_;
  Copies params_ = Copies(replicas_), opt_ = Copies(replicas_), state_ = Copies(replicas_),
         grads_ = Copies(replicas_), output_ = Copies(replicas_);
  std::vector<DropoutLayer> dropouts_;
  std::vector<float> staging_, targets_, mask_, part_staging_;
  Metrics metrics_;
  int64_t steps_done_ = 0;
  bool step_finite_ = true;
};

}  // namespace

std::unique_ptr<Executable> compile_pjrt(const nn::Model& model, const CompileOptions& options, uint64_t seed) {
  require_fp32(options.precision, "PJRT");
  std::string path = options.pjrt.plugin;
  if (path.empty()) {  // compiled without choose_device (tests, the library): the default plugin
    const PjrtReport& r = find_pjrt("pjrt");
    require(r.usable(), "--device pjrt: " + r.why_unusable);
    path = r.plugin;
  }
  pjrt::Client& client = pjrt::Client::open(path, options.pjrt.replicas);
  // Replicas (XLA's num_replicas) still run as whole-step modules; one
  // replica is a device behind the Program, as the CPU and CUDA are.
  if (options.pjrt.replicas != 1) return std::make_unique<PjrtExecutable>(model, options, seed, client);
  const std::string why = pjrt::pjrt_unsupported(model, options);
  require(why.empty(), "--device pjrt: " + why + "; train this model on the CPU (--device cpu)");
  return compile_pjrt_program(model, options, seed, client);
}

}  // namespace convoy
