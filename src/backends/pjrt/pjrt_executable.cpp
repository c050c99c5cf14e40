// The PJRT Executable: one compiled StableHLO program per kind of step
// (stablehlo_step.h) on the first device of the selected plugin's client.
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
#include <utility>

#include "backends/dropout_mask.h"
#include "backends/pjrt/plugin.h"
#include "backends/pjrt/stablehlo_step.h"
#include "backends/targets.h"
#include "convoy/backends/devices.h"
#include "convoy/backends/executable.h"
#include "convoy/core/error.h"

namespace convoy {
namespace {

using pjrt::Buffer;

Shape with_batch(int64_t batch, const Shape& s) {
  Shape out{batch};
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

class PjrtExecutable final : public Executable {
 public:
  PjrtExecutable(const nn::Model& model, const CompileOptions& options, uint64_t seed, pjrt::Client& client)
      : client_(client), model_(model), options_(options), seed_(seed),
        example_size_(numel(model.input_shape())), classes_(model.output_shape().at(0)) {
    require(options.batch_size >= 1, "batch size must be at least 1, got " + std::to_string(options.batch_size));
    const std::string why = pjrt::pjrt_unsupported(model, options);
    require(why.empty(), "--device pjrt: " + why + "; train this model on the CPU (--device cpu)");
    step_options_ = {.batch = options.batch_size, .loss = options.loss, .label_smoothing = options.label_smoothing,
                     .optimizer = options.optimizer};
    train_ = client_.compile(pjrt::emit_train_module(model, step_options_));
    eval_ = client_.compile(pjrt::emit_eval_module(model, step_options_));
    opt_floats_ = optim::state_size(options.optimizer, model.num_parameters());
    set_parameters(model.initial_parameters(seed));
    set_state(model.initial_state());
    set_optimizer_state(std::vector<float>(opt_floats_, 0.0f));
    for (std::size_t i = 0; i < model.layers().size(); ++i)
      if (auto* d = std::get_if<nn::Dropout>(&model.layers()[i].layer))
        dropouts_.push_back({i, d->rate, dropout_layer_seed(seed, i),
                             with_batch(options.batch_size, model.layers()[i].output_shape)});
    platform_ = client_.platform();
  }

  int64_t batch_size() const override { return options_.batch_size; }
  int64_t input_size() const override { return example_size_; }
  int64_t output_size() const override { return classes_; }
  std::string device() const override { return "pjrt:" + platform_; }

  void train_step(const float* x, Targets y) override {
    std::vector<Buffer> in = batch_inputs(x, y, batch_size());
    const float lr = options_.optimizer.lr;
    in.push_back(client_.upload(std::span<const float>(&lr, 1), {}));
    for (auto& m : masks()) in.push_back(std::move(m));
    std::vector<PJRT_Buffer*> args{params_.get(), opt_.get(), state_.get()};
    for (const auto& b : in) args.push_back(b.get());
    auto out = std::move(client_.execute(*train_, {args})[0]);
    take_step_outputs(out);
    add_step(stats(out[3]).data());
  }

  // steps_per_execution batches as one program (a loop on the device); a
  // shorter run (an epoch's tail) goes step by step.
  int64_t steps_per_call() const override { return options_.steps_per_execution; }
  int64_t train_steps(const float* x, Targets y, int64_t n) override {
    const int64_t steps = options_.steps_per_execution;
    if (steps == 1 || n != steps) return Executable::train_steps(x, y, n);
    if (!train_many_) {
      pjrt::StepOptions o = step_options_;
      o.steps = steps;
      train_many_ = client_.compile(pjrt::emit_train_module(model_, o));
    }
    const int64_t batch = batch_size();
    std::vector<Buffer> in = batch_inputs(x, y, batch, steps);
    const float lr = options_.optimizer.lr;
    in.push_back(client_.upload(std::span<const float>(&lr, 1), {}));
    for (auto& m : masks(steps)) in.push_back(std::move(m));
    std::vector<PJRT_Buffer*> args{params_.get(), opt_.get(), state_.get()};
    for (const auto& b : in) args.push_back(b.get());
    auto out = std::move(client_.execute(*train_many_, {args})[0]);
    take_step_outputs(out);
    std::vector<float> rows(steps * 3);
    client_.download(out[3], rows.data(), rows.size() * sizeof(float));
    for (int64_t i = 0; i < steps; ++i) {
      add_step(&rows[i * 3]);
      if (!step_finite_) return i + 1;
    }
    return steps;
  }

  double loss_and_gradients(const float* x, Targets y) override {
    if (!gradients_) gradients_ = client_.compile(pjrt::emit_gradients_module(model_, step_options_));
    std::vector<Buffer> in = batch_inputs(x, y, batch_size());
    for (auto& m : masks()) in.push_back(std::move(m));
    std::vector<PJRT_Buffer*> args{params_.get(), state_.get()};
    for (const auto& b : in) args.push_back(b.get());
    auto out = std::move(client_.execute(*gradients_, {args})[0]);
    state_ = std::move(out[0]);  // donated: a training-mode forward moves the running statistics (as the CPU's)
    grads_ = std::move(out[2]);
    output_ = std::move(out[3]);
    return stats(out[1])[0] / static_cast<double>(batch_size());
  }

  void eval_step(const float* x, Targets y, int64_t count) override {
    const int64_t n = batch_size();
    require(count >= 0 && count <= n, "eval_step: count " + std::to_string(count) + " exceeds the batch size");
    std::vector<Buffer> in = batch_inputs(x, y, count);
    const auto rows = static_cast<int32_t>(count);
    in.push_back(client_.upload(std::span<const int32_t>(&rows, 1), {}));
    std::vector<PJRT_Buffer*> args{params_.get(), state_.get()};
    for (const auto& b : in) args.push_back(b.get());
    auto out = std::move(client_.execute(*eval_, {args})[0]);
    output_ = std::move(out[1]);
    const auto s = stats(out[0]);
    metrics_.loss_sum += s[0];
    metrics_.correct += static_cast<int64_t>(s[1]);
    metrics_.count += count;
  }

  Metrics take_metrics() override { return std::exchange(metrics_, {}); }
  Metrics peek_metrics() const override { return metrics_; }
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

  int64_t parameter_count() const override { return model_.num_parameters(); }
  int64_t state_count() const override { return model_.num_state(); }
  int64_t optimizer_state_size() const override { return opt_floats_; }
  void set_parameters(std::span<const float> p) override { params_ = upload_flat(p, model_.num_parameters(), "parameters"); }
  void get_parameters(std::span<float> p) const override { download_flat(params_, p, model_.num_parameters(), "parameters"); }
  void get_gradients(std::span<float> g) const override {
    if (!grads_) {
      require(static_cast<int64_t>(g.size()) == model_.num_parameters(), "gradients: size mismatch");
      std::fill(g.begin(), g.end(), 0.0f);
      return;
    }
    download_flat(grads_, g, model_.num_parameters(), "gradients");
  }
  void set_state(std::span<const float> s) override { state_ = upload_flat(s, model_.num_state(), "state"); }
  void get_state(std::span<float> s) const override { download_flat(state_, s, model_.num_state(), "state"); }
  void set_optimizer_state(std::span<const float> s) override { opt_ = upload_flat(s, opt_floats_, "optimizer state"); }
  void get_optimizer_state(std::span<float> s) const override { download_flat(opt_, s, opt_floats_, "optimizer state"); }
  void get_output(std::span<float> out) const override {
    require(static_cast<int64_t>(out.size()) == batch_size() * classes_,
            "output: expected " + std::to_string(batch_size() * classes_) + " values, got " + std::to_string(out.size()));
    if (!output_) return std::fill(out.begin(), out.end(), 0.0f);
    client_.download(output_, out.data(), out.size_bytes());
  }
  void get_input_gradient(std::span<float>) const override {
    throw UserError("input gradient: the PJRT backend does not compute it; use the CPU backend");
  }

 private:
  struct DropoutLayer {
    std::size_t index;
    float rate;
    uint64_t seed;
    Shape shape;  // [batch, ...]
  };

  // The buffers a training program returns (stablehlo_step.h's order). The
  // first three arguments were donated: their successors replace them.
  void take_step_outputs(std::vector<Buffer>& out) {
    params_ = std::move(out[0]);
    opt_ = std::move(out[1]);
    state_ = std::move(out[2]);
    grads_ = std::move(out[4]);
    output_ = std::move(out[5]);
  }

  // One step's stats row: loss sum, correct count, finite flag.
  void add_step(const float* s) {
    step_finite_ = s[2] != 0;
    if (!step_finite_) return;
    metrics_.loss_sum += s[0];
    metrics_.correct += static_cast<int64_t>(s[1]);
    metrics_.count += batch_size();
    ++steps_done_;
  }

  // x (the first `rows` examples; the rest zeros) and the targets as dense
  // rows; `steps` batches stacked ([steps, batch, ...]) when more than one.
  std::vector<Buffer> batch_inputs(const float* x, Targets y, int64_t rows, int64_t steps = 1) {
    const int64_t n = batch_size();
    check_targets(options_.loss, y, steps == 1 ? rows : steps * n, classes_);
    Shape xs = with_batch(n, model_.input_shape()), ts{n, classes_};
    if (steps > 1) {
      xs.insert(xs.begin(), steps);
      ts.insert(ts.begin(), steps);
    }
    std::vector<Buffer> in;
    if (rows == n) {
      in.push_back(client_.upload(std::span<const float>(x, steps * n * example_size_), xs));
    } else {
      staging_.assign(n * example_size_, 0.0f);
      std::memcpy(staging_.data(), x, sizeof(float) * rows * example_size_);
      in.push_back(client_.upload(staging_, xs));
    }
    const int64_t all_rows = steps == 1 ? rows : steps * n;
    targets_.assign(steps * n * classes_, 0.0f);
    if (y.dense)
      std::memcpy(targets_.data(), y.dense, sizeof(float) * all_rows * classes_);
    else
      for (int64_t i = 0; i < all_rows; ++i) targets_[i * classes_ + y.labels[i]] = 1.0f;
    in.push_back(client_.upload(targets_, ts));
    return in;
  }

  // The dropout masks of the next `steps` steps, drawn as the CPU backend
  // draws them (stacked when more than one).
  std::vector<Buffer> masks(int64_t steps = 1) {
    std::vector<Buffer> out;
    for (const auto& d : dropouts_) {
      const int64_t n = d.shape[0], per = numel(d.shape) / n;
      const int64_t channels = d.shape.size() == 4 ? d.shape[1] : per;
      const int64_t pixels = d.shape.size() == 4 ? d.shape[2] * d.shape[3] : 1;
      const float keep = 1.0f / (1.0f - d.rate);
      mask_.resize(steps * n * per);
      for (int64_t k = 0; k < steps; ++k)
        for (int64_t e = 0; e < n; ++e) {
          const uint64_t stream = dropout_example_stream(d.seed, steps_done_ + k, n, e);
          float* m = mask_.data() + (k * n + e) * per;
          for (int64_t j = 0; j < per; ++j)
            m[j] = d.rate > 0 && dropout_drops(stream, dropout_cpu_index(j, channels, pixels), d.rate)
                       ? 0.0f
                       : keep;
        }
      Shape shape = d.shape;
      if (steps > 1) shape.insert(shape.begin(), steps);
      out.push_back(client_.upload(mask_, shape));
    }
    return out;
  }

  std::array<float, 3> stats(const Buffer& b) const {
    std::array<float, 3> s{};
    client_.download(b, s.data(), sizeof s);
    return s;
  }

  Buffer upload_flat(std::span<const float> v, int64_t floats, const char* what) {
    require(static_cast<int64_t>(v.size()) == floats, std::string(what) + ": expected " + std::to_string(floats) +
                                                          " values, got " + std::to_string(v.size()));
    std::vector<float> padded(v.begin(), v.end());
    padded.resize(pjrt::device_length(floats), 0.0f);
    const std::vector<int64_t> dims{pjrt::device_length(floats)};
    return client_.upload(padded, dims);
  }

  void download_flat(const Buffer& b, std::span<float> out, int64_t floats, const char* what) const {
    require(static_cast<int64_t>(out.size()) == floats, std::string(what) + ": expected " + std::to_string(floats) +
                                                            " values, got " + std::to_string(out.size()));
    std::vector<float> all(pjrt::device_length(floats));
    client_.download(b, all.data(), all.size() * sizeof(float));
    std::copy_n(all.begin(), floats, out.begin());
  }

  pjrt::Client& client_;
  nn::Model model_;
  CompileOptions options_;
  pjrt::StepOptions step_options_;
  uint64_t seed_;
  int64_t example_size_, classes_, opt_floats_ = 0;
  std::string platform_;
  std::unique_ptr<pjrt::Program> train_, eval_, gradients_, train_many_;
  Buffer params_, opt_, state_, grads_, output_;
  std::vector<DropoutLayer> dropouts_;
  std::vector<float> staging_, targets_, mask_;
  Metrics metrics_;
  int64_t steps_done_ = 0;
  bool step_finite_ = true;
};

}  // namespace

std::unique_ptr<Executable> compile_pjrt(const nn::Model& model, const CompileOptions& options, uint64_t seed) {
  require_fp32(options.precision, "PJRT");
  const std::string& plugin = selected_pjrt_plugin();
  std::string path = plugin;
  if (path.empty()) {  // compiled without choose_device (tests, the library): the default plugin
    const PjrtReport& r = find_pjrt("pjrt");
    require(r.usable(), "--device pjrt: " + r.why_unusable);
    path = r.plugin;
  }
  return std::make_unique<PjrtExecutable>(model, options, seed, pjrt::Client::open(path));
}

}  // namespace convoy
