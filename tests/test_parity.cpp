// Parity with PyTorch: the seed network on the weights and batch that
// tests/fixtures/make_parity_fixtures.py fed to PyTorch 1.13. Outputs, loss,
// every parameter gradient, BatchNorm running statistics, two SGD steps and
// inference-mode outputs all match to 1e-4 relative — for every copy of the
// CPU kernels this machine runs (base, AVX2, AVX-512; the others are skipped,
// named).
#include <gtest/gtest.h>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/io/model_weights.h"
#include "test_helpers.h"

namespace convoy {
namespace {

constexpr double kTol = 1e-4;

class Parity : public ::testing::TestWithParam<KernelSet> {
 protected:
  void SetUp() override {
    if (!cpu_runs(GetParam())) GTEST_SKIP() << "this CPU cannot run the " << kernel_set_name(GetParam()) << " kernels";
    fixture = io::read_safetensors(std::string(CONVOY_FIXTURES_DIR) + "/seed_cnn_parity.safetensors");
    start = io::from_named(model, fixture, "parity fixture");
    batch = fixture.at("labels").dim(0);
    exe = compile_cpu(model,
                      {.batch_size = batch, .loss = Loss::nll, .optimizer = {.lr = 0.01f, .momentum = 0.5f},
                       .cpu_kernels = GetParam()},
                      0);
    exe->internals().write(Held::parameters, start.params);
    exe->internals().write(Held::state, start.state);
  }
  std::span<const float> f(const std::string& name) const { return fixture.at(name).data<float>(); }
  const float* x() const { return fixture.at("input").data<float>().data(); }
  const int32_t* y() const { return fixture.at("labels").data<int32_t>().data(); }

  // Compares every tensor named prefix + slot.name with the flat buffer.
  void expect_named(const std::string& prefix, const std::vector<float>& flat, bool state) const {
    for (const auto& plan : model.layers())
      for (const auto& slot : state ? plan.state : plan.params) {
        std::span<const float> mine(flat.data() + slot.offset, slot.size());
        EXPECT_LT(testing::relative_error(mine, f(prefix + slot.name)), kTol) << prefix << slot.name;
      }
  }

  nn::Sequential model = nn::seed_cnn();
  io::NamedTensors fixture;
  io::FlatWeights start;
  int64_t batch = 0;
  std::unique_ptr<Executable> exe;
};

}  // namespace

TEST_P(Parity, ForwardLossGradientsAndRunningStats) {
  const double loss = exe->internals().loss_and_gradients(x(), y());
  EXPECT_NEAR(loss, f("loss")[0], kTol * std::abs(f("loss")[0]));
  std::vector<float> out(batch * 10), grads(model.num_parameters()), state(model.num_state());
  exe->internals().read(Held::output, out);
  EXPECT_LT(testing::relative_error(out, f("output")), kTol);
  exe->internals().read(Held::gradients, grads);
  expect_named("grad.", grads, false);
  exe->internals().read(Held::state, state);
  expect_named("after_step1.", state, true);
}

TEST_P(Parity, TwoSgdMomentumStepsThenInference) {
  exe->train_step(x(), y());
  exe->train_step(x(), y());
  std::vector<float> params(model.num_parameters());
  exe->internals().read(Held::parameters, params);
  expect_named("step2.", params, false);
  exe->eval_step(x(), y(), batch);
  std::vector<float> out(batch * 10);
  exe->internals().read(Held::output, out);
  EXPECT_LT(testing::relative_error(out, f("eval_output")), kTol);
}

INSTANTIATE_TEST_SUITE_P(KernelSets, Parity, ::testing::Values(KernelSet::base, KernelSet::avx2, KernelSet::avx512),
                         [](const auto& info) { return std::string(kernel_set_name(info.param)); });

}  // namespace convoy
