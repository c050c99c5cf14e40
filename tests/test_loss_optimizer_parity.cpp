// Parity with PyTorch for every loss variant and every optimizer, on the
// logits, targets, parameters and gradients that
// tests/fixtures/make_loss_optimizer_fixtures.py fed to PyTorch 1.13.
#include <gtest/gtest.h>

#include "convoy/backends/executable.h"
#include "convoy/backends/executable_internals.h"
#include "convoy/io/safetensors.h"
#include "test_helpers.h"

namespace convoy {
namespace {

constexpr double kTol = 1e-5;

const io::NamedTensors& fixture() {
  static const io::NamedTensors f =
      io::read_safetensors(std::string(CONVOY_FIXTURES_DIR) + "/loss_optimizer_parity.safetensors");
  return f;
}
std::span<const float> f(const std::string& name) { return fixture().at(name).data<float>(); }

// The loss and d loss / d logits that convoy computes for the fixture's logits:
// the logits are the input of a model that passes them through (or takes
// their log-softmax), so the input gradient is the logits' gradient.
void expect_loss_matches(const std::string& name, Loss loss, bool log_softmax, float smoothing, Targets targets) {
  SCOPED_TRACE(name);
  const int64_t batch = 8, classes = 5;
  nn::Sequential model({classes}, {log_softmax ? nn::Layer{nn::LogSoftmax{}} : nn::Layer{nn::Flatten{}}});
  auto exe = compile_cpu(model, {.batch_size = batch, .loss = loss, .label_smoothing = smoothing, .input_gradient = true}, 0);
  const double value = exe->internals().loss_and_gradients(f("loss.logits").data(), targets);
  EXPECT_NEAR(value, f("loss." + name + ".value")[0], kTol * std::abs(f("loss." + name + ".value")[0]));
  std::vector<float> grad(batch * classes);
  exe->internals().read(Held::input_gradient, grad);
  EXPECT_LT(testing::relative_error(grad, f("loss." + name + ".grad")), kTol);
}

const int32_t* labels() { return fixture().at("loss.labels").data<int32_t>().data(); }

}  // namespace

TEST(LossParity, CrossEntropyClassIndicesWithLabelSmoothing) {
  expect_loss_matches("ce_sparse_smooth", Loss::softmax_cross_entropy, false, 0.1f, labels());
}
TEST(LossParity, CrossEntropyProbabilityTargets) {
  expect_loss_matches("ce_soft", Loss::softmax_cross_entropy, false, 0, Targets::rows(f("loss.soft").data()));
}
TEST(LossParity, NllOnLogSoftmax) { expect_loss_matches("nll_sparse", Loss::nll, true, 0, labels()); }
TEST(LossParity, BinaryCrossEntropyMultiLabelSmoothed) {
  expect_loss_matches("bce_multi_smooth", Loss::binary_cross_entropy, false, 0.1f,
                      Targets::rows(f("loss.multi").data()));
}
TEST(LossParity, BinaryCrossEntropyRejectsClassIndices) {
  nn::Sequential model({5}, {nn::Flatten{}});
  auto exe = compile_cpu(model, {.batch_size = 8, .loss = Loss::binary_cross_entropy}, 0);
  EXPECT_NE(testing::error_of([&] { exe->internals().loss_and_gradients(f("loss.logits").data(), labels()); })
                .find("binary cross-entropy needs one-hot or multi-hot"),
            std::string::npos);
}

// Five steps of each optimizer from the same parameters and gradients, with
// gradients clipped to global norm 1 first (torch.nn.utils.clip_grad_norm_).
TEST(OptimizerParity, FiveStepsOfEachOptimizerMatchPyTorch) {
  using optim::Kind;
  const std::vector<std::pair<std::string, optim::OptimizerOptions>> cases = {
      {"sgd_nesterov_wd", {.kind = Kind::sgd, .lr = 0.05f, .momentum = 0.9f, .weight_decay = 0.01f, .nesterov = true}},
      {"adam_wd", {.kind = Kind::adam, .lr = 0.01f, .weight_decay = 0.01f, .beta2 = 0.99f, .eps = 1e-7f}},
      {"adamw", {.kind = Kind::adamw, .lr = 0.01f, .weight_decay = 0.1f}},
      {"rmsprop", {.kind = Kind::rmsprop, .lr = 0.01f, .eps = 1e-6f, .alpha = 0.9f}},
      {"rmsprop_momentum_wd", {.kind = Kind::rmsprop, .lr = 0.01f, .momentum = 0.5f, .weight_decay = 0.01f}},
  };
  for (auto [name, opt] : cases) {
    SCOPED_TRACE(name);
    opt.clip_norm = 1.0f;
    std::vector<float> p(f("opt.p0").begin(), f("opt.p0").end());
    std::vector<float> state(static_cast<std::size_t>(optim::state_size(opt, static_cast<int64_t>(p.size()))));
    for (int i = 0; i < 5; ++i) {
      std::vector<float> g(f("opt.grad" + std::to_string(i)).begin(), f("opt.grad" + std::to_string(i)).end());
      optim::step(opt, p, g, state);
      EXPECT_LT(testing::relative_error(p, f("opt." + name + ".step" + std::to_string(i))), kTol) << "step " << i;
    }
  }
}

}  // namespace convoy
