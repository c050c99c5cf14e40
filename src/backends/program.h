#pragma once
// The compiled program: the training step written once for every device.
// compile_cpu and compile_cuda (and the tests' fake device) each hand a
// Device (device.h) to a Program, which plans memory (graph_plan.h plus the
// flat parameter, gradient, optimizer and state buffers), binds one op per
// layer, and runs forward, loss, backward, gradient sums, the replicas'
// reducers, the numerical guard and the optimizer as device work in stream
// order; with profiling on, the same loop records timestamps. On a device
// that captures steps (CUDA graphs), train_steps captures each (bank, n,
// target kind) the second time it sees it and replays it after that; a
// capture that fails falls back to eager steps. A device with replicas
// (device.h) runs them all: the Program plans one replica's memory and rows.
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backends/device.h"
#include "backends/graph_plan.h"
#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"

namespace convoy {

// Where a Program's batch sits in a larger one (a slice, backends/batch_slices.h):
// examples [first_example, first_example + batch) of a batch of of_batch
// (0: it is the whole batch). Dropout draws the whole batch's masks from it.
struct BatchSlice {
  int64_t first_example = 0, of_batch = 0;
};

class Program final : public Executable, public ExecutableInternals {
 public:
  Program(const nn::Model& model, const CompileOptions& options, uint64_t seed, std::unique_ptr<Device> device,
          BatchSlice slice = {});
  ~Program() override;

  const CompiledFor& compiled_for() const override { return compiled_for_; }
  void train_step(const float* x, Targets y) override { train_steps(x, y, 1); }
  int64_t train_steps(const float* x, Targets y, int64_t n) override;
  bool last_step_finite() const override { return step_finite_; }
  void eval_step(const float* x, Targets y, int64_t count) override;
  Metrics metrics(Metrics::Then then) override;
  float learning_rate() const override { return options_.optimizer.lr; }
  void set_learning_rate(float lr) override;
  ExecutableInternals& internals() override { return *this; }

  int64_t size(Held held) const override;
  void read(Held held, std::span<float> to) const override;
  void write(Held held, std::span<const float> from) override;
  double loss_and_gradients(const float* x, Targets y) override;
  void restore_metrics(const Metrics& m) override;
  void set_steps_done(int64_t steps) override;
  std::string nonfinite_report() const override;
  void set_profiling(bool on) override;
  std::vector<LayerProfile> profile() const override { return profile_; }
  int64_t profiled_steps() const override { return profiled_steps_; }
  void set_gradient_reducer(GradientReducer* reducer) override;
  void set_batch_norm_reducer(StatisticsReducer reducer) override;

  // Captured steps (tests): how many captures succeeded, and why the last
  // one failed ("" when none did). After a failure steps run one by one.
  int64_t captures() const { return captures_; }
  const std::string& capture_failure() const { return capture_failure_; }
  Device& device_for_tests() { return *device_; }

 private:
  enum class Step { train, gradients_only };
  void plan_memory(const nn::Model& model);
  std::vector<int64_t> plan_trainable_runs(const nn::Model& model);
  void bind_ops(const nn::Model& model);
  void run_training(int bank, int64_t n, bool dense);
  CapturedSteps* captured_for(int bank, int64_t n, bool dense);
  void enqueue_step(int bank, int64_t i, bool dense, Step kind, bool timed);
  void update_parameters();
  void sum_gradient(std::size_t activation);
  void forget_captures();
  LossCall loss_call(const Slot& s, bool dense, int64_t rows) const;
  DeviceScalars read_scalars() const;
  float* flat(Held held) const;  // the device buffer behind `held` (none for the input gradient)

  CompileOptions options_;
  BatchSlice slice_;
  int64_t batch_, example_size_, classes_;
  int64_t rows_;    // of each replica (the device's): batch_ / device_->replicas()
  int64_t slots_;  // batches per bank: what one chunk of train_steps runs
  CompiledFor compiled_for_;
  std::unique_ptr<Device> device_;
  std::size_t layers_ = 0;

  // The flat buffers and the graph plan's arena, all device memory.
  int64_t params_count_ = 0, state_count_ = 0, optimizer_state_count_ = 0;
  float *params_ = nullptr, *grads_ = nullptr, *optimizer_state_ = nullptr, *state_ = nullptr;
  float* state_before_ = nullptr;  // the BN state before the current step (numerical guard)
  DeviceScalars* scalars_ = nullptr;
  float* activations_ = nullptr;
  float *input_ = nullptr, *d_input_ = nullptr, *output_ = nullptr, *d_output_ = nullptr;
  GraphPlan plan_;
  // Frozen layers: the trainable parameters' runs and their packed copies.
  bool gather_ = false;
  int64_t trainable_count_ = 0, run_count_ = 0;
  float *packed_params_ = nullptr, *packed_grads_ = nullptr;
  int64_t* runs_ = nullptr;  // run_count_ flat starts, then run_count_ packed starts
  std::vector<int64_t> host_runs_;

  struct Sum {
    float* into = nullptr;
    std::vector<const float*> parts;
    int64_t elements = 0;
  };
  std::vector<Sum> sums_;                      // per activation
  std::vector<std::span<float>> layer_grads_;  // per layer: its slice of grads_ (empty without parameters)
  GradientReducer* reducer_ = nullptr;         // replicas: averages grads_

  // What nonfinite_report() scans, in the order a step computes it.
  struct LayerBuffers {
    std::string name;
    const float *output = nullptr, *output_gradient = nullptr;
    int64_t size = 0;
    bool is_view = false;
    // Its output and output gradient are never written: an inner layer of a
    // chain the device fused (Device::runs_in), whose last layer's are.
    bool unwritten = false;
    std::vector<std::pair<int64_t, int64_t>> params;  // (offset, size) in the flat buffers
  };
  std::vector<LayerBuffers> report_layers_;
  bool fault_was_last_step_ = true;  // the buffers still hold the faulty step

  std::map<std::tuple<int, int64_t, bool>, std::unique_ptr<CapturedSteps>> captured_;
  std::set<std::tuple<int, int64_t, bool>> ran_eagerly_;
  bool captures_work_ = true;
  int64_t captures_ = 0;
  std::string capture_failure_;

  int64_t count_ = 0;  // evaluated examples in the metrics since the last take (the sums live on the device)
  bool step_finite_ = true;
  bool profiling_ = false;
  int64_t profiled_steps_ = 0;
  std::vector<LayerProfile> profile_;
};

}  // namespace convoy
