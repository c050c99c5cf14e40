#pragma once
// An Executable that trains nothing and records which examples each training
// step saw: give it data whose label is the example's index. For tests of
// what the trainer feeds a model (sharding, epochs), without a backend.
#include <algorithm>
#include <utility>
#include <vector>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/data/labeled_images.h"

namespace convoy::testing {

class RecordingExecutable final : public Executable, public ExecutableInternals {
 public:
  explicit RecordingExecutable(int64_t batch)
      : batch_(batch), compiled_for_{.device = "recorder", .batch_size = batch, .input_size = 1, .output_size = 1} {}
  std::vector<int32_t> seen;  // labels of every trained example, in order

  const CompiledFor& compiled_for() const override { return compiled_for_; }
  void train_step(const float*, Targets y) override {
    seen.insert(seen.end(), y.labels, y.labels + batch_);
    metrics_.count += batch_;
  }
  bool last_step_finite() const override { return true; }
  void eval_step(const float*, Targets, int64_t count) override { metrics_.count += count; }
  Metrics metrics(Metrics::Then then) override {
    return then == Metrics::reset ? std::exchange(metrics_, {}) : metrics_;
  }
  float learning_rate() const override { return lr_; }
  void set_learning_rate(float lr) override { lr_ = lr; }
  ExecutableInternals& internals() override { return *this; }

  // No weights: every buffer is empty.
  int64_t size(Held) const override { return 0; }
  void read(Held, std::span<float>) const override {}
  void write(Held, std::span<const float>) override {}
  double loss_and_gradients(const float*, Targets) override { return 0; }
  void restore_metrics(const Metrics& m) override { metrics_ = m; }
  std::string nonfinite_report() const override { return ""; }
  void set_profiling(bool) override {}
  std::vector<LayerProfile> profile() const override { return {}; }
  int64_t profiled_steps() const override { return 0; }
  void set_gradient_reducer(GradientReducer* reducer) override {
    require(reducer == nullptr, "recorder: this backend cannot train as one of several replicas");
  }
  void set_batch_norm_reducer(StatisticsReducer reducer) override {
    require(!reducer, "recorder: this backend has no synchronised batch norm");
  }

 private:
  int64_t batch_;
  CompiledFor compiled_for_;
  float lr_ = 0.01f;
  Metrics metrics_;
};

// n examples [1, 1, 1] whose label is their index.
inline data::LabeledImages indexed_examples(int64_t n) {
  data::LabeledImages d{Tensor(DType::f32, {n, 1, 1, 1}), Tensor(DType::i32, {n})};
  auto labels = d.labels.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) labels[i] = static_cast<int32_t>(i);
  return d;
}

}  // namespace convoy::testing
