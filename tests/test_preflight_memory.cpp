// What the memory check before training counts (app/preflight.h): the
// optimizer's state of the trainable parameters only, and one example's
// activations as the CPU backend's batch check counts them (nn::activation_floats).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "app/preflight.h"
#include "convoy/config/run_config.h"
#include "convoy/nn/model.h"
#include "convoy/optim/optimizer.h"

namespace convoy::train {
namespace {

nn::Model small_cnn() {
  return nn::Model({3, 16, 16}, {nn::Conv2d{.filters = 32, .kernel = 3}, nn::ReLU{}, nn::BatchNorm{}, nn::Flatten{},
                                 nn::Dense{.units = 10}});
}

TEST(PreflightMemory, FrozenLayersKeepNoOptimizerState) {
  const optim::OptimizerOptions adam{.kind = optim::Kind::adam};
  nn::Model model = small_cnn();
  const double all = training_memory(model, adam).bytes;
  model.set_trainable(false, "conv2d_0");
  const double frozen = training_memory(model, adam).bytes;
  const int64_t conv = model.layers()[0].params[0].size() + model.layers()[0].params[1].size();
  EXPECT_EQ(model.num_trainable_parameters(), model.num_parameters() - conv);
  // Adam keeps two floats per trainable parameter; the frozen conv's are gone.
  // With a layer frozen the step gathers the trainable values and gradients
  // into packed copies (Program::plan_memory): two floats per trainable one.
  const auto trainable = static_cast<double>(model.num_trainable_parameters());
  EXPECT_DOUBLE_EQ(all - frozen, (2.0 * static_cast<double>(conv) - 2.0 * trainable) * sizeof(float));
}

TEST(PreflightMemory, CountsOneExamplesActivationsAsTheBatchCheck) {
  const nn::Model model = small_cnn();
  double outputs = 0;
  for (const auto& plan : model.layers()) outputs += static_cast<double>(numel(plan.output_shape));
  EXPECT_DOUBLE_EQ(nn::activation_floats(model), 2.0 * (3 * 16 * 16 + outputs));  // input staged twice, each output and gradient
  const optim::OptimizerOptions sgd{};
  // Each parameter's host copy, backend copy and gradient, and SGD's velocity;
  // the batch norm's running statistics and their copy from before the step.
  const double weights = 3.0 * static_cast<double>(model.num_parameters()) +
                         static_cast<double>(optim::state_size(sgd, model.num_parameters()));
  EXPECT_DOUBLE_EQ(training_memory(model, sgd).bytes,
                   (nn::activation_floats(model) + weights + 2.0 * static_cast<double>(model.num_state())) * sizeof(float));
}

// Transfer learning trains the head alone, then every layer: the check
// takes the phase that needs the most. Here the fine-tune phase (Adam's two
// floats for each of 16.8M weights) does not fit the address space left and
// the head-only phase does, so a run that would fail only after its frozen
// epochs is refused before the first. Exits 0 when the limit falls between
// the two and the check sees it.
[[noreturn]] void check_both_phases_under_a_limit() {
  const nn::Model model({4096}, {nn::Dense{.units = 4096}, nn::Dense{.units = 10}});
  RunConfig c;
  c.optimizer = "adam";
  c.epochs = 2;
  c.freeze_epochs = 1;
  RunConfig head_only = c;
  head_only.epochs = 1;  // the frozen phase alone
  nn::Model frozen = model, full = model;
  frozen.set_trainable(false, "dense_0");
  const double head_bytes = training_memory(frozen, optimizer_options(c)).bytes;
  const double fine_tune_bytes = training_memory(full, optimizer_options(c)).bytes;
  if (!(fine_tune_bytes > head_bytes * 1.4)) std::_Exit(3);
  // The address space left: halfway between the two phases' needs.
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0;
  statm >> pages;
  const auto left = static_cast<rlim_t>((head_bytes + fine_tune_bytes) / 2);
  const rlimit limit{pages * ::sysconf(_SC_PAGESIZE) + left, RLIM_INFINITY};
  if (::setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(4);
  try {
    require_memory_for_model(model, head_only);
  } catch (const UserError&) {
    std::_Exit(5);  // the head-only phase should fit
  }
  try {
    require_memory_for_model(model, c);
  } catch (const UserError& e) {
    std::_Exit(std::string(e.what()).find("to train") != std::string::npos ? 0 : 6);
  }
  std::_Exit(7);  // the fine-tune phase went uncounted
}

TEST(PreflightMemory, TheFineTunePhaseCountsNotOnlyTheFrozenOne) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(check_both_phases_under_a_limit(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace convoy::train
